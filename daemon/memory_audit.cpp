#include "memory_audit.h"

#include <spdlog/spdlog.h>

#include <map>
#include <vector>

#include "logging.h"
#include "memory_broker.h"

namespace gpushare::daemon {
namespace {

using policies::DeclarationVerdict;

struct Measured {
  uint64_t bytes = 0;
  bool available = true;  // false: NVML listed the pid without a number
};

// pid -> what it holds over all devices.
std::map<uint32_t, Measured> by_pid(const NvmlReading& reading) {
  std::map<uint32_t, Measured> out;
  for (const DeviceProcesses& d : reading.devices)
    for (const ProcessUse& p : d.processes) {
      Measured& m = out[p.pid];
      if (!p.bytes) {
        m.available = false;
        continue;
      }
      // Saturating: NVML's numbers are checked, not trusted.
      m.bytes = *p.bytes > UINT64_MAX - m.bytes ? UINT64_MAX : m.bytes + *p.bytes;
    }
  return out;
}

// `total` spread over the job's devices in proportion to its checked bytes on each; the rounding
// remainder goes to the device with the most.
std::map<int, uint64_t> spread(const Job& job, uint64_t total, uint64_t checked_total) {
  std::map<int, uint64_t> out;
  if (total == 0 || checked_total == 0) return out;
  uint64_t given = 0;
  int largest = -1;
  uint64_t largest_bytes = 0;
  for (const auto& [device, d] : job.memory_on) {
    uint64_t checked = checked_bytes(job, device);
    if (checked == 0) continue;
    auto share =
        static_cast<uint64_t>(static_cast<unsigned __int128>(total) * checked / checked_total);
    out[device] = share;
    given += share;
    if (checked > largest_bytes) largest = device, largest_bytes = checked;
  }
  if (largest >= 0) out[largest] += total - given;
  return out;
}

std::string device_list(const Job& job) {
  std::string out;
  for (const auto& [device, d] : job.memory_on)
    out += (out.empty() ? "" : ",") + std::to_string(device);
  return out.empty() ? "-" : out;
}

}  // namespace

uint64_t checked_bytes(const Job& job, int device) {
  return job_bytes(job, device) - job_swappable(job, device);  // swappable <= bytes (registry.h)
}

void DeclarationAudit::note_pid_namespace(bool jobs_hold_memory,
                                          const policies::DeclarationCheckParams& params,
                                          Clock::time_point now) {
  if (pids_matched_ || !jobs_hold_memory) {
    unmatched_since_.reset();
    return;
  }
  if (!unmatched_since_) unmatched_since_ = now;
  if (namespace_noted_ || now - *unmatched_since_ <= params.grace) return;
  namespace_noted_ = true;
  spdlog::warn(
      "declarations are not checked: jobs hold memory but none of their pids is in NVML's "
      "process list (gpushared may run in another pid namespace than NVML reports, e.g. in a "
      "container without the host's pid namespace)");
}

bool DeclarationAudit::apply(Registry& registry, const NvmlReading& reading,
                             const policies::DeclarationCheckParams& params, Clock::time_point now,
                             LogLimiter& log_limiter) {
  std::map<uint32_t, Measured> measured = by_pid(reading);
  under_mps_ = false;
  for (const DeviceProcesses& d : reading.devices) {
    if (!d.mps_server) continue;
    under_mps_ = true;
    if (mps_noted_.insert(d.index).second)
      spdlog::info(
          "NVML device {}: an MPS server runs there and holds its clients' memory: declarations "
          "are not checked while it runs",
          d.index);
  }
  bool jobs_hold_memory = false;
  for (auto& [id, job] : registry.jobs()) {
    auto it = measured.find(static_cast<uint32_t>(job.peer.pid));
    bool holds = false;
    for (const auto& [device, d] : job.memory_on) holds = holds || checked_bytes(job, device) > 0;
    jobs_hold_memory = jobs_hold_memory || holds;
    if (it != measured.end() && job.peer.pid > 0) pids_matched_ = true;
  }
  note_pid_namespace(jobs_hold_memory, params, now);

  // One process may hold several connections: what it holds is compared with what all its jobs
  // declared, or two jobs could each declare what the process holds.
  std::map<pid_t, std::vector<Job*>> by_process;
  for (auto& [id, job] : registry.jobs()) by_process[job.peer.pid].push_back(&job);
  bool changed = false;
  for (auto& [pid, jobs] : by_process) {
    // Swappable memory is not checked, so where the rest is does not depend on the swap state.
    uint64_t declared = 0;
    for (Job* job : jobs)
      for (const auto& [device, d] : job->memory_on) declared += checked_bytes(*job, device);
    auto it = measured.find(static_cast<uint32_t>(pid));
    policies::DeclarationSample sample;
    sample.declared_bytes = declared;
    if (it != measured.end() && it->second.available) sample.measured_bytes = it->second.bytes;
    // Listed without a number says nothing either.
    sample.listing_complete = listing_trusted() && it == measured.end();
    auto excess_it = excess_.find(pid);
    if (excess_it != excess_.end())
      sample.excess_lasted =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - excess_it->second.since);
    policies::DeclarationCheck check{};
    // Under MPS the server holds its clients' memory, and what NVML reports of a client listed
    // under its own pid is not known to be all it holds: nobody is judged while it runs.
    if (pid > 0 && !under_mps_) check = policies::check_declaration(sample, params);
    bool excess = check.verdict == DeclarationVerdict::excess_in_grace ||
                  check.verdict == DeclarationVerdict::over_declaring;
    if (!excess && excess_it != excess_.end()) excess_.erase(excess_it);
    if (excess) excess_.try_emplace(pid, Excess{now, now}).first->second.seen = now;
    std::optional<uint64_t> measured_bytes;
    if (check.verdict != DeclarationVerdict::not_measured)
      measured_bytes = sample.measured_bytes.value_or(0);

    // The unhonoured bytes shared among its jobs as they declared; the remainder to the last.
    uint64_t left = check.unhonoured_bytes;
    for (size_t k = 0; k < jobs.size(); ++k) {
      Job& job = *jobs[k];
      JobMemory& m = job.memory_state;
      m.measured_bytes = measured_bytes;
      uint64_t own = 0;
      for (const auto& [device, d] : job.memory_on) own += checked_bytes(job, device);
      uint64_t share =
          k + 1 == jobs.size() || declared == 0
              ? left
              : static_cast<uint64_t>(static_cast<unsigned __int128>(check.unhonoured_bytes) * own /
                                      declared);
      share = std::min(share, left);
      left -= share;
      std::map<int, uint64_t> unhonoured = spread(job, share, own);
      if (unhonoured == m.unhonoured) continue;
      if (m.unhonoured.empty()) {
        if (log_limiter.admit("job=" + std::to_string(job.id) + " over-declared", now))
          spdlog::warn(
              "over-declared memory pid={} uid={} job={} id={} device={} declared={} "
              "measured={}: {} bytes declared beyond what the process holds (plus {} bytes of "
              "slack) for over {} ms no longer count toward the capacity",
              pid, job.peer.uid, log_text(job.name), job.id, device_list(job), own,
              sample.measured_bytes.value_or(0), share,
              policies::declaration_slack(declared, params), params.grace.count());
      } else if (unhonoured.empty()) {
        spdlog::info("declarations of pid={} job={} id={} count in full again ({})", pid,
                     log_text(job.name), job.id, policies::declaration_verdict_name(check.verdict));
      }
      m.unhonoured = std::move(unhonoured);
      changed = true;
    }
  }
  // The pids whose jobs have all left a grace period ago are not coming back.
  std::erase_if(excess_, [&](const auto& e) { return now - e.second.seen > params.grace; });
  return changed;
}

}  // namespace gpushare::daemon
