#include "scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "gpushare/policies/tick.h"

namespace gpushare::daemon {

namespace {

Scheduler::DeviceStatus status_of(const policies::Policy& policy,
                                  const policies::DeviceObservation& observation,
                                  const std::vector<policies::Gate>& gates) {
  Scheduler::DeviceStatus status;
  status.production_progress = policy.production_progress();
  if (observation.window_ns == 0) return status;
  double allowed = 0;
  bool any = false;
  for (size_t i = 0; i < gates.size() && i < observation.jobs.size(); ++i) {
    if (observation.jobs[i].job_class != policies::JobClass::opportunistic) continue;
    any = true;
    const policies::Gate& gate = gates[i];
    if (gate.paused) continue;
    if (gate.launches == policies::kUnlimited) allowed = std::numeric_limits<double>::infinity();
    allowed += static_cast<double>(gate.launches == policies::kUnlimited ? 0 : gate.launches);
  }
  if (any) status.opportunistic_limit_per_second = allowed * 1e9 / observation.window_ns;
  return status;
}

}  // namespace

uint32_t completion_stride_for(uint64_t launches, uint32_t current) {
  uint32_t wanted = 1;
  while (wanted < kLargestCompletionStride && uint64_t{wanted} * 2 * 8 <= launches) wanted *= 2;
  if (current == 0) return wanted;
  if (launches == 0) return current;  // an idle window says nothing of the next burst
  return wanted >= 4 * current || 4 * wanted <= current ? wanted : current;
}

CompletionMarks completion_marks_for(uint64_t launches, uint32_t current, bool idle_gated,
                                     bool measured) {
  uint32_t stride = completion_stride_for(launches, current);
  if (idle_gated) stride = std::min(stride, kIdleGatingStride);
  return {.stride = stride, .poll_us = idle_gated || measured ? kIdleGatingPollUs : 0};
}

std::vector<int> Scheduler::devices_of(const Job& job) {
  std::vector<int> devices = job.devices_in_use();
  if (devices.empty()) devices.push_back(0);
  return devices;
}

policies::Gate strictest_gate(const std::vector<policies::Gate>& gates) {
  policies::Gate strictest = gates.empty() ? policies::Gate{} : gates.front();
  for (const policies::Gate& g : gates) {
    strictest.paused = strictest.paused || g.paused;
    strictest.launches = std::min(strictest.launches, g.launches);
    if (g.max_in_flight != 0)
      strictest.max_in_flight = strictest.max_in_flight == 0
                                    ? g.max_in_flight
                                    : std::min(strictest.max_in_flight, g.max_in_flight);
    strictest.production_idle_only = strictest.production_idle_only || g.production_idle_only;
    strictest.measure_production = strictest.measure_production || g.measure_production;
  }
  return strictest;
}

std::string Scheduler::explain(int device) const {
  auto it = devices_.find(device);
  return it != devices_.end() && it->second.policy ? it->second.policy->explain() : std::string();
}

Scheduler::DevicePolicy* Scheduler::policy_for(int device, const PolicyChoice& choice) {
  DevicePolicy& slot = devices_[device];
  if (slot.policy && slot.choice.name == choice.name && slot.choice.parameters == choice.parameters)
    return &slot;
  policies::MakePolicyResult made = policies::make_policy(choice.name, choice.parameters, kShimCapabilities);
  if (!made.policy) {
    // Config and ctl validate before a choice is stored, so this means a bug: keep the old one.
    spdlog::error("device {}: cannot start policy {}: {}", device, choice.name, made.error);
    return slot.policy ? &slot : nullptr;
  }
  spdlog::info("device {}: policy {} in force", device, choice.name);
  slot.choice = choice;
  slot.policy = std::move(made.policy);
  return &slot;
}

void Scheduler::tick(Registry& registry, Clock::time_point now,
                     const std::function<PolicyChoice(int device)>& choice_for) {
  uint64_t window_ns =
      last_tick_ == Clock::time_point{}
          ? 0
          : static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_tick_).count());
  last_tick_ = now;

  // Each job's observation, on each of its devices. Counters come from client memory:
  // policies::observe trusts none of them (a counter that went backwards is no work).
  std::map<int, policies::DeviceObservation> observed;
  std::map<uint64_t, Job*> by_id;
  std::map<uint64_t, uint64_t> window_launches;  // by job id
  std::set<uint64_t> alive;
  for (auto& [id, job] : registry.jobs()) {
    if (!job.block.valid()) continue;
    alive.insert(id);
    by_id[id] = &job;
    Seen& seen = seen_[id];
    policies::JobCounters c;
    c.job_id = id;
    c.job_class = job.granted;
    c.mps_client = job.mps_client;
    c.launches = job.block.launches();
    c.gate_waits = job.block.gate_waits();
    c.completed_launches = job.block.completed_launches();
    // The shim publishes its in-flight count at each launch it makes under a bound.
    c.in_flight = job.block.in_flight();
    c.bounded = seen.max_in_flight > 0;
    if (seen.relayed) {
      c.in_flight_ns = seen.in_flight_ns;
      // The count the relay last saw move, with the busy time up to that sample: this window's
      // completions over the time they took (a count read now would hold completions whose time
      // the next window gets).
      if (std::optional<policies::CompletionPace::Reading> paced = seen.pace.take()) {
        c.completed_launches = paced->completed;
        c.paced_in_flight_ns = paced->in_flight_ns;
      }
    } else {
      // Not sampled in this window: what the pace last saw is stale (the count has moved since,
      // without its time); it starts again at the relay's next sample.
      seen.pace = {};
    }
    seen.relayed = false;
    seen.in_flight_ns = 0;
    const policies::JobObservation o = policies::observe(seen.history, c, window_ns);
    window_launches[id] = o.launches;
    // A job on several devices is seen by each device's policy, with all of its launches: the
    // shim counts a process's launches, not a device's.
    for (int d : devices_of(job)) observed[d].jobs.push_back(o);
  }
  for (auto it = seen_.begin(); it != seen_.end();)
    it = alive.count(it->first) ? std::next(it) : seen_.erase(it);
  for (auto it = activity_.begin(); it != activity_.end();)
    it = alive.count(it->first) ? std::next(it) : activity_.erase(it);
  relayed_.clear();

  status_.clear();
  std::map<uint64_t, std::vector<policies::Gate>> decided;  // by job id: one gate per device
  std::set<uint64_t> on_relayed_device;  // jobs on a device the idle relay samples
  std::set<uint64_t> beside_idle_gated;  // jobs on a device where some job is idle-gated
  uint64_t now_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  for (auto& [device, observation] : observed) {
    DevicePolicy* slot = policy_for(device, choice_for(device));
    if (!slot) continue;
    observation.now_ns = now_ns;
    observation.window_ns = window_ns;
    const std::vector<policies::Gate> gates = slot->policy->decide(observation);
    if (spdlog::should_log(spdlog::level::trace)) {
      // One line per device and tick: what the policy saw and what it decided (for tuning).
      // A production job the relay samples also shows its quiet time (ProductionActivity).
      auto quiet_trace = [this](const policies::JobObservation& job) {
        auto activity = activity_.find(job.job_id);
        return activity != activity_.end() && job.in_flight_ns
                   ? fmt::format("/{}us-quiet",
                                 activity->second.quiet_ns(kRelayActivityTimes) / 1000)
                   : std::string();
      };
      std::string line;
      for (size_t i = 0; i < observation.jobs.size() && i < gates.size(); ++i)
        line += fmt::format(
            " job{}:{}:{}l/{}w{}->{}{}{}{}{}{}", observation.jobs[i].job_id,
            observation.jobs[i].job_class == policies::JobClass::production ? "P" : "O",
            observation.jobs[i].launches, observation.jobs[i].gate_waits,
            observation.jobs[i].completed ? fmt::format("/{}c", *observation.jobs[i].completed)
                                          : std::string(),
            gates[i].launches == policies::kUnlimited ? std::string("inf")
                                                      : std::to_string(gates[i].launches),
            gates[i].paused                 ? "(paused)"
            : gates[i].production_idle_only ? "(gated)"
                                            : "",
            gates[i].max_in_flight > 0 ? fmt::format("/q{}", gates[i].max_in_flight)
                                       : std::string(),
            observation.jobs[i].in_flight_ns
                ? fmt::format("/{}us-busy", *observation.jobs[i].in_flight_ns / 1000)
                : std::string(),
            observation.jobs[i].paced_in_flight_ns
                ? fmt::format("/{}us-paced", *observation.jobs[i].paced_in_flight_ns / 1000)
                : std::string(),
            quiet_trace(observation.jobs[i]));
      const std::string why = slot->policy->explain();
      spdlog::trace("tick device={} window={}us{}{}{}", device, observation.window_ns / 1000, line,
                    why.empty() ? "" : " ", why);
    }
    status_[device] = status_of(*slot->policy, observation, gates);
    RelayedDevice idle;
    bool measured = false;  // the policy reads production's busy time here
    for (const policies::Gate& gate : gates) {
      auto job = by_id.find(gate.job_id);
      if (job == by_id.end()) continue;
      measured = measured || gate.measure_production;
      if (job->second->granted == protocol::JobClass::production)
        idle.production.push_back(gate.job_id);
      else if (gate.production_idle_only)
        idle.gated.push_back(gate.job_id);
    }
    // The relay samples this device's production jobs (frequent polls; fine marks only where some
    // job is idle-gated: completion_marks_for) while some job is idle-gated or the policy measures
    // production's busy time.
    const bool relayed = !idle.gated.empty() || measured;
    for (const policies::Gate& gate : gates) {
      if (!by_id.count(gate.job_id)) continue;
      decided[gate.job_id].push_back(gate);
      if (relayed) on_relayed_device.insert(gate.job_id);
      if (!idle.gated.empty()) beside_idle_gated.insert(gate.job_id);
    }
    if (relayed) relayed_[device] = std::move(idle);
  }

  // One gate per job, the strictest of its devices' (a job on one device: that device's).
  for (auto& [id, job_gates] : decided) {
    Job* job = by_id[id];
    const policies::Gate gate = strictest_gate(job_gates);
    const bool relayed = on_relayed_device.count(id) > 0;
    Seen& seen = seen_[id];
    // What the control block gets: production never bounded nor idle-gated (policies/tick.h).
    const policies::JobControl v = policies::control_for(gate, job->granted, seen.history.launches);
    const bool production = job->granted == protocol::JobClass::production;
    const uint32_t bound = v.max_in_flight;
    const CompletionMarks marks =
        production ? completion_marks_for(window_launches[id], seen.completion_stride,
                                          beside_idle_gated.count(id) > 0, relayed)
                   : CompletionMarks{};
    if (marks.stride != seen.completion_stride) {
      job->block.set_completion_stride(marks.stride);
      seen.completion_stride = marks.stride;
    }
    const uint32_t poll_us = marks.poll_us;
    if (poll_us != seen.completion_poll_us) {
      job->block.set_completion_poll_us(poll_us);
      seen.completion_poll_us = poll_us;
    }
    if (!v.production_idle_only && seen.held_for_production) {
      job->block.set_paused_while_production_busy(false);
      seen.held_for_production = false;
    }
    if (bound != seen.max_in_flight) {
      job->block.set_max_in_flight(bound);
      seen.max_in_flight = bound;
    }
    if (v.allowance == seen.allowance && v.paused == seen.paused) continue;
    job->block.set_gate(v.allowance, v.paused);
    seen.allowance = v.allowance;
    seen.paused = v.paused;
  }
  if (relaying())
    relay(registry, now);
  else
    last_relay_ = {};
}

void Scheduler::relay(Registry& registry, Clock::time_point now) {
  const uint64_t now_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  // Time since the previous sample, credited to the jobs busy now (at most a few periods: a loop
  // that stalled says nothing about the time it missed).
  const uint64_t elapsed_ns =
      last_relay_ == Clock::time_point{}
          ? 0
          : std::min<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_relay_).count(),
                4 * std::chrono::duration_cast<std::chrono::nanoseconds>(kIdleRelayPeriod).count());
  last_relay_ = now;
  // Each production job is sampled once, busy or not, so each one's history stays current; a
  // device is busy while any of its production jobs is, and a gated job (on several devices,
  // perhaps) is held while any of its devices is busy.
  std::map<uint64_t, bool> production_busy;
  std::map<uint64_t, bool> hold;
  for (const auto& [device, idle] : relayed_) {
    bool busy = false;
    for (uint64_t id : idle.production) {
      auto job = registry.jobs().find(id);
      auto seen = seen_.find(id);
      if (job == registry.jobs().end() || seen == seen_.end() || !job->second.block.valid())
        continue;
      auto [sample, fresh] = production_busy.try_emplace(id, false);
      if (fresh) {
        const SharedControlBlock& b = job->second.block;
        ProductionActivity& activity = activity_[id];
        const std::optional<uint64_t> completed = b.completed_launches();
        sample->second = activity.busy({b.launches(), completed, b.last_mark_launch()}, now_ns,
                                       kRelayActivityTimes);
        Seen& s = seen->second;
        s.relayed = true;
        const uint64_t credited_ns = activity.in_flight() ? elapsed_ns : 0;
        s.in_flight_ns += credited_ns;
        s.pace.sample(completed, credited_ns);
      }
      busy = busy || sample->second;
    }
    for (uint64_t id : idle.gated) hold[id] = hold[id] || busy;
  }
  for (const auto& [id, held] : hold) {
    auto job = registry.jobs().find(id);
    auto seen = seen_.find(id);
    if (job == registry.jobs().end() || seen == seen_.end() || !job->second.block.valid()) continue;
    if (seen->second.held_for_production == held) continue;
    job->second.block.set_paused_while_production_busy(held);
    seen->second.held_for_production = held;
  }
}

}  // namespace gpushare::daemon
