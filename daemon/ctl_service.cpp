#include "ctl_service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "container_identity.h"
#include "device_inventory.h"
#include "gpushare/protocol/ctl.h"
#include "logging.h"
#include "memory_config.h"
#include "scheduler.h"

#ifndef GPUSHARE_VERSION
#define GPUSHARE_VERSION "unknown"
#endif

namespace gpushare::daemon {

using nlohmann::json;
using protocol::JobClass;
namespace ctl = protocol::ctl;

namespace {

json failure(const std::string& error) {
  return {{"ok", false}, {"error", error}};
}

// A pod's allocation field (pod_allocations.h), null outside a pod or without one.
json pod_field(const Job& job, std::optional<std::string> PodIdentity::*field) {
  const std::optional<PodIdentity>& pod = job.peer.pod;
  return pod && (*pod).*field ? json(*((*pod).*field)) : json(nullptr);
}

// The job's gate as its control block holds it (`gpusharectl record` draws it per tick).
json gate_json(const Job& job) {
  const protocol::ControlBlock* b = job.block.page();
  if (!b) return nullptr;
  uint64_t allowance = b->allowance.load(std::memory_order_relaxed);
  const uint32_t bound = b->max_in_flight.load(std::memory_order_relaxed);
  const std::optional<uint32_t> in_flight = job.block.in_flight();
  return {{"paused", b->paused.load(std::memory_order_relaxed) != 0},
          {"allowance", allowance == protocol::kUnlimited ? json(nullptr) : json(allowance)},
          {"gate_waits", job.block.gate_waits()},
          {"gated_ns", b->gated_ns.load(std::memory_order_relaxed)},
          // The bound on its kernels in flight (null: none) and the count its shim last
          // published under one (null: not tracked).
          {"max_in_flight", bound == 0 ? json(nullptr) : json(bound)},
          {"in_flight", in_flight ? json(*in_flight) : json(nullptr)}};
}

// Every parameter of a policy with the value in force: the given ones, defaults for the rest.
json effective_parameters(const PolicyChoice& choice) {
  json out = json::object();
  for (const policies::ParameterSpec& spec : policies::parameter_specs(choice.name)) {
    auto it = choice.parameters.find(spec.name);
    out[std::string(spec.name)] = it == choice.parameters.end() ? spec.default_value : it->second;
  }
  return out;
}

std::optional<JobClass> parse_class(const std::string& name) {
  if (name == "production") return JobClass::production;
  if (name == "opportunistic") return JobClass::opportunistic;
  return std::nullopt;
}

}  // namespace

json CtlService::answer(const Peer& caller, const json& request) {
  try {
    const std::string command = request.at(ctl::kCommand).get<std::string>();
    if (command == ctl::command::kStatus) return status();
    if (command == ctl::command::kJobs) return jobs();
    if (command == ctl::command::kSetPriority) return set_priority(caller, request);
    if (command == ctl::command::kPolicy) return policy(caller, request);
    if (command == ctl::command::kReload) return reload(caller);
    if (command == ctl::command::kSetLimit) return set_limit(caller, request);
    return failure("unknown command \"" + command + "\"");
  } catch (const json::exception& e) {
    // A field of the wrong type: the request is well-framed JSON, so answer instead of dropping.
    return failure(std::string("malformed request: ") + e.what());
  }
}

json CtlService::status() {
  const std::set<int> devices = hooks_.known_devices();
  // A job registered for "any device" that holds no memory yet is scheduled on device 0
  // (Scheduler::devices_of), and counted there.
  auto scheduled_on = [](const Job& job) { return Scheduler::devices_of(job); };
  json device_list = json::array();
  for (int d : devices) {
    size_t jobs = 0;
    double rate = 0;
    uint64_t memory = 0;
    for (auto& [id, job] : parts_.registry.jobs()) {
      std::vector<int> used = scheduled_on(job);
      if (std::find(used.begin(), used.end(), d) == used.end()) continue;
      ++jobs;
      rate += job.rate.per_second();
      auto by_device = job.memory_by_device();
      if (auto it = by_device.find(d); it != by_device.end()) memory += it->second;
    }
    std::optional<uint64_t> capacity = parts_.memory.capacity(parts_.config.memory, d);
    std::string uuid = parts_.inventory.uuid_text(d);
    device_list.push_back({{"device", d},
                           {"uuid", uuid.empty() ? json(nullptr) : json(uuid)},
                           {"policy", parts_.policies.policy_for(d)},
                           {"parameters", effective_parameters(parts_.policies.choice_for(d))},
                           {"capacity_bytes", capacity ? json(*capacity) : json(nullptr)},
                           {"jobs", jobs},
                           {"kernels_per_s", rate},
                           {"memory_bytes", memory},
                           // Rotating residency (docs/memory.md): null while nothing rotates.
                           {"rotation", hooks_.rotation(d)},
                           {"policy_state", hooks_.policy_state(d)}});
  }
  size_t production = 0;
  for (auto& [id, job] : parts_.registry.jobs()) production += job.granted == JobClass::production;
  const DaemonFacts facts = hooks_.facts();
  return {{"ok", true},
          {"daemon",
           {{"version", GPUSHARE_VERSION},
            {"protocol", protocol::kWireVersion},
            {"pid", getpid()},
            {"uptime_s", facts.uptime_s},
            {"config", facts.config_path},
            {"socket", facts.socket_path},
            {"socket_activated", facts.socket_activated},
            {"proc_root", facts.proc_root},
            {"tick_ms", parts_.config.tick.count()},
            {"default_policy", parts_.config.default_policy},
            {"oversubscribe", parts_.config.memory.oversubscribe},
            {"clients", facts.clients},
            {"jobs", parts_.registry.size()},
            {"production_jobs", production},
            {"dropped_clients", facts.dropped_clients}}},
          {"devices", device_list}};
}

json CtlService::jobs() {
  json jobs = json::array();
  Clock::time_point now = Clock::now();
  // The reply must fit one frame whatever the jobs hold: jobs that would not
  // fit are left out and counted in "jobs_omitted" (a margin is kept for the envelope).
  const size_t budget = protocol::kMaxPayload - 1024;
  size_t used = 0, omitted = 0;
  for (auto& [id, job] : parts_.registry.jobs()) {
    if (used >= budget) {
      ++omitted;
      continue;
    }
    json memory = json::array();
    for (const auto& [device, bytes] : job.memory_by_device())
      memory.push_back({{"device", device}, {"bytes", bytes}});
    jobs.push_back(
        {{"id", job.id},
         {"pid", job.peer.pid},
         {"client_pid", job.client_pid},
         {"uid", job.peer.uid},
         {"gid", job.peer.gid},
         {"job", job.name},
         {"pod_uid", job.peer.pod ? json(job.peer.pod->pod_uid) : json(nullptr)},
         {"container_id", job.peer.pod ? json(job.peer.pod->container_id) : json(nullptr)},
         {"qos", job.peer.pod ? json(qos_name(job.peer.pod->qos)) : json(nullptr)},
         {"resource", pod_field(job, &PodIdentity::resource)},
         {"pod_namespace", pod_field(job, &PodIdentity::pod_namespace)},
         {"pod_name", pod_field(job, &PodIdentity::pod_name)},
         {"class", class_name(job.granted)},
         {"requested_class", class_name(job.requested)},
         {"devices", job.devices_in_use()},
         {"mps_client", job.mps_client},
         {"kernels_per_s", job.rate.per_second()},
         {"launches", job.rate.last()},
         {"memory_bytes", job.memory_bytes()},
         {"allocations", job.memory.size()},
         {"memory_state", job_memory_report(parts_.config.memory, job, true)},
         {"memory", memory},
         {"gate", gate_json(job)},
         {"age_s", std::chrono::duration<double>(now - job.registered).count()}});
    // Production jobs' completion signal (shim/completions.h), where the shim publishes it.
    if (std::optional<uint64_t> completed = job.block.completed_launches())
      jobs.back()["completed_launches"] = std::min(*completed, job.rate.last());
    size_t size = jobs.back().dump(-1, ' ', false, json::error_handler_t::replace).size() + 1;
    if (used + size > budget) {
      jobs.erase(jobs.size() - 1);
      ++omitted;
      used = budget;
      continue;
    }
    used += size;
  }
  json answer = {{"ok", true}, {"jobs", jobs}};
  if (omitted) answer["jobs_omitted"] = omitted;
  return answer;
}

std::optional<std::string> CtlService::find_targets(const json& request, std::vector<Job*>* targets,
                                                    std::string* target) {
  if (request.contains(ctl::field::kPid)) {
    int64_t pid = request.at(ctl::field::kPid).get<int64_t>();
    *targets = parts_.registry.find_by_pid(static_cast<pid_t>(pid));
    *target = "pid " + std::to_string(pid);
  } else if (request.contains(ctl::field::kJob)) {
    std::string name = request.at(ctl::field::kJob).get<std::string>();
    *targets = parts_.registry.find_by_name(name);
    *target = "job '" + name + "'";
  } else {
    return "give \"pid\" or \"job\"";
  }
  if (targets->empty()) return "no registered job with " + *target;
  // A job name is chosen by whoever starts the job (GPUSHARE_JOB), so it names jobs of one user
  // only by agreement: a name that several users' jobs carry acts on them only when asked to
  // with "all".
  if (request.contains(ctl::field::kJob) && !request.value(ctl::field::kAll, false)) {
    std::set<uid_t> uids;
    for (const Job* job : *targets) uids.insert(job->peer.uid);
    if (uids.size() > 1) {
      std::string list;
      for (uid_t uid : uids) list += (list.empty() ? "" : ", ") + std::to_string(uid);
      return *target + " names jobs of " + std::to_string(uids.size()) + " users (uids " + list +
             "): give a pid, or --all to act on every one of them";
    }
  }
  return std::nullopt;
}

json CtlService::set_priority(const Peer& caller, const json& request) {
  auto to = parse_class(request.value(ctl::field::kClass, std::string()));
  if (!to) return failure("\"class\" must be \"production\" or \"opportunistic\"");
  std::vector<Job*> targets;
  std::string target;
  if (std::optional<std::string> error = find_targets(request, &targets, &target))
    return failure(*error);
  // All or nothing: one refused target refuses the whole request.
  for (Job* job : targets) {
    Decision d = may_set_priority(parts_.config, caller, job->peer.uid, job->granted, *to);
    if (!d.allowed) {
      spdlog::warn("refuse set-priority pid={} job={} -> {} by pid={} uid={}: {}", job->peer.pid,
                   log_text(job->name), class_name(*to), caller.pid, caller.uid, d.reason);
      parts_.counters.refused(Refusal::set_priority);
      return failure("refused: " + d.reason);
    }
  }
  json changed = json::array();
  for (Job* job : targets) {
    JobClass from = job->granted;
    if (from != *to) hooks_.set_class(*job, *to, caller);
    changed.push_back({{"id", job->id},
                       {"pid", job->peer.pid},
                       {"job", job->name},
                       {"from", class_name(from)},
                       {"to", class_name(*to)}});
  }
  return {{"ok", true}, {"jobs", changed}};
}

json CtlService::policy(const Peer& caller, const json& request) {
  Decision d = may_administer(parts_.config, caller);
  if (!d.allowed) {
    spdlog::warn("refuse policy by pid={} uid={}: {}", caller.pid, caller.uid, d.reason);
    parts_.counters.refused(Refusal::policy);
    return failure("refused: " + d.reason);
  }
  int64_t device = request.at(ctl::field::kDevice).get<int64_t>();
  std::string name = request.at(ctl::field::kPolicy).get<std::string>();
  if (device < 0 || device > protocol::kMaxDeviceIndex)
    return failure("device must be 0.." + std::to_string(protocol::kMaxDeviceIndex));
  std::set<int> seen;
  for (const auto& [d, bytes] : parts_.memory.physical) seen.insert(d);
  for (auto& [id, job] : parts_.registry.jobs())
    for (int d : job.devices_in_use()) seen.insert(d);
  if (auto unknown = unknown_device(static_cast<int>(device), nvidia_device_nodes(), seen))
    return failure(*unknown);
  if (!policy_known(name))
    return failure("unknown policy \"" + name + "\" (expected one of: " + known_policies_text() +
                   ")");
  policies::Parameters parameters;
  if (request.contains(ctl::field::kParameters)) {
    if (!request[ctl::field::kParameters].is_string())
      return failure("parameters must be a string such as \"target=0.9,control_period_ms=100\"");
    std::string error =
        policies::parse_parameters(request[ctl::field::kParameters].get<std::string>(), parameters);
    if (!error.empty()) return failure("policy " + name + ": " + error);
  }
  // The registry validates names and ranges; a refused choice leaves the current policy in force.
  policies::MakePolicyResult made = policies::make_policy(name, parameters, kShimCapabilities);
  if (!made.policy) return failure("policy " + name + ": " + made.error);
  std::string from = parts_.policies.policy_for(static_cast<int>(device));
  parts_.policies.choose(static_cast<int>(device), name, parameters);
  json in_force = effective_parameters(parts_.policies.choice_for(static_cast<int>(device)));
  spdlog::info("policy device={} {} -> {} {} by pid={} uid={}", device, from, name, in_force.dump(),
               caller.pid, caller.uid);
  return {
      {"ok", true}, {"device", device}, {"from", from}, {"policy", name}, {"parameters", in_force}};
}

json CtlService::reload(const Peer& caller) {
  Decision d = may_administer(parts_.config, caller);
  if (!d.allowed) {
    spdlog::warn("refuse reload by pid={} uid={}: {}", caller.pid, caller.uid, d.reason);
    parts_.counters.refused(Refusal::reload);
    return failure("refused: " + d.reason);
  }
  spdlog::info("reload requested by pid={} uid={}", caller.pid, caller.uid);
  ConfigResult result = hooks_.reload();
  if (!result.config)
    return failure("the configuration was not reloaded (the previous one stays in force): " +
                   result.error_text());
  return {{"ok", true}, {"config", hooks_.facts().config_path}};
}

// {"command": "set-limit", "pid": N | "job": name, "bytes": N | null | "unlimited"}: null
// returns the job to its configured rule, "unlimited" lifts every limit. Administrators may set
// any limit; a job's owner may only tighten its own job's limit (set one, or lower it).
json CtlService::set_limit(const Peer& caller, const json& request) {
  std::optional<uint64_t> bytes;
  if (!request.contains(ctl::field::kBytes))
    return failure("give \"bytes\" (a number, or null for none)");
  const json& asked = request.at(ctl::field::kBytes);
  const bool unlimited = asked == ctl::field::kUnlimited;
  if (!asked.is_null() && !unlimited) {
    bytes = parse_bytes(asked);
    if (!bytes) return failure("\"bytes\" must be bytes such as 8589934592 or \"8G\", or null");
    if (*bytes == 0)
      return failure(
          "a limit of 0 bytes would refuse every allocation; null returns the job to "
          "its configured limit");
  }
  std::vector<Job*> targets;
  std::string target;
  if (std::optional<std::string> error = find_targets(request, &targets, &target))
    return failure(*error);
  bool admin = may_administer(parts_.config, caller).allowed;
  for (Job* job : targets) {
    std::optional<uint64_t> now = job_limit(parts_.config.memory, *job);
    bool tightens = bytes && (!now || *bytes <= *now);
    if (!admin && !(job->peer.uid == caller.uid && tightens)) {
      spdlog::warn("refuse set-limit pid={} job={} by pid={} uid={}", job->peer.pid,
                   log_text(job->name), caller.pid, caller.uid);
      parts_.counters.refused(Refusal::set_limit);
      return failure(
          "refused: only root or the admin group may raise or remove a limit, and "
          "only on their own jobs may others lower one");
    }
  }
  json changed = json::array();
  for (Job* job : targets) {
    std::optional<uint64_t> from = job_limit(parts_.config.memory, *job);
    // null ("none"): back to the configuration's rule, if one matches (docs/daemon.md).
    if (bytes || unlimited)
      job->memory_state.limit_override = bytes;
    else
      job->memory_state.limit_override.reset();
    std::optional<uint64_t> to = job_limit(parts_.config.memory, *job);
    spdlog::info("set-limit pid={} job={} id={} {} -> {}{} by pid={} uid={}", job->peer.pid,
                 log_text(job->name), job->id, from ? std::to_string(*from) : "none",
                 to ? std::to_string(*to) : "none",
                 bytes || unlimited ? "" : " (the configured rule)", caller.pid, caller.uid);
    changed.push_back({{"id", job->id},
                       {"pid", job->peer.pid},
                       {"job", job->name},
                       {"from", from ? json(*from) : json(nullptr)},
                       {"to", to ? json(*to) : json(nullptr)},
                       {"configured", !bytes && !unlimited}});
  }
  publish_views(parts_.registry, parts_.memory, parts_.config.memory);
  return {{"ok", true}, {"jobs", changed}};
}

}  // namespace gpushare::daemon
