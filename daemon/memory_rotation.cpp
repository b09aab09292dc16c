// Rotating residency (docs/memory.md): when the opportunistic jobs of a device need more memory
// than production leaves, they take turns. Each tick and device, the numbers are gathered into a
// policies::RotationState, policies::decide_rotation says who runs, who is prefetched and who
// leaves, rotation_steps (rotation_steps.h) says which of that to ask for now, and the requests go
// to the shims through the control blocks (request_residency, memory_swap.cpp). Production is
// never part of it: its bytes only shrink the budget.
//
// Every event is one log line, in the order it happens: `rotation starts`, `rotation prefetch`,
// `rotation switch`, `swap-out ... rotation`, `swap-in ... rotation`, `rotation resume`,
// `rotation ends`, beside the shims' acknowledgements (`prefetched`, `swapped-out`, `swapped-in`).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "logging.h"
#include "memory_service.h"
#include "rotation_steps.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;

// The jobs that take turns on `device`: opportunistic, with swappable memory there.
bool rotates_on(const Job& job, int device) {
  return job.granted == JobClass::opportunistic && job_swappable(job, device) > 0;
}

std::string job_text(const Job* job, uint64_t id) {
  return job ? "job=" + log_text(job->name) + " id=" + std::to_string(id)
             : "id=" + std::to_string(id) + " (left)";
}

// Who has the turn, and the log line when it passes (or the rotation starts or ends).
void pass_turn(int d, const policies::RotationDecision& decision, Registry& registry,
               DeviceRotation& track) {
  if (!decision.rotating) {
    if (track.current && decision.too_large.empty())
      spdlog::info("rotation ends device={}: every job fits in {} bytes", d, decision.budget_bytes);
    else if (track.current)
      spdlog::info(
          "rotation ends device={}: what fits in {} bytes runs, {} job(s) larger than "
          "that wait on host",
          d, decision.budget_bytes, decision.too_large.size());
    track.current.reset();
    track.running_since.reset();
  } else if (decision.order.front() != track.current) {
    const uint64_t head = decision.order.front();
    if (!track.current) {
      std::string order;
      for (uint64_t id : decision.order) order += (order.empty() ? "" : ",") + std::to_string(id);
      spdlog::info(
          "rotation starts device={} budget={} order={}: {} jobs need more than the budget", d,
          decision.budget_bytes, order, decision.order.size());
    } else {
      spdlog::info("rotation switch device={} {} after {}", d, job_text(registry.find(head), head),
                   job_text(registry.find(*track.current), *track.current));
    }
    track.current = head;
    track.running_since.reset();
  }
}

// The steps, asked of the jobs' shims, each with its log line.
void carry_out(int d, const std::vector<RotationStep>& steps, Registry& registry,
               const DeviceRotation& track, Clock::time_point now) {
  const std::string turn =
      track.current ? job_text(registry.find(*track.current), *track.current) : "none";
  for (const RotationStep& step : steps) {
    Job* job = registry.find(step.job_id);
    if (!job) continue;
    switch (step.kind) {
      case RotationStepKind::swap_out:
        spdlog::info("swap-out job={} id={} device={} bytes={}: rotation, turn of {}",
                     log_text(job->name), job->id, d, step.bytes, turn);
        request_residency(*job, /*to_host=*/true, now);
        break;
      case RotationStepKind::swap_in:
        spdlog::info("swap-in job={} id={} device={} bytes={}: rotation, its turn",
                     log_text(job->name), job->id, d, step.bytes);
        request_residency(*job, /*to_host=*/false, now);
        break;
      case RotationStepKind::prefetch:
        spdlog::info(
            "rotation prefetch job={} id={} device={} bytes={} of {}: during the turn of {}",
            log_text(job->name), job->id, d, step.bytes, job_swappable(*job, d), turn);
        request_residency(*job, /*to_host=*/false, now, step.bytes);
        break;
      case RotationStepKind::resume:
        spdlog::info("rotation resume job={} id={} device={}: all of it was prefetched",
                     log_text(job->name), job->id, d);
        resume_prefetched(*job);
        break;
    }
  }
}

}  // namespace

void MemoryService::rotate_memory(Clock::time_point now) {
  std::set<int> devices;
  for (const auto& [device, rotation] : broker_.rotation) devices.insert(device);
  for (auto& [id, job] : parts_.registry.jobs())
    for (const auto& [device, memory] : job.memory_on)
      if (rotates_on(job, device)) devices.insert(device);
  for (int d : devices) rotate_device(d, now);
}

void MemoryService::rotate_device(int d, Clock::time_point now) {
  const std::optional<uint64_t> capacity = broker_.capacity(parts_.config.memory, d);
  DeviceRotation& track = broker_.rotation[d];
  bool gone = true;  // no job of the device takes turns any more
  for (auto& [id, job] : parts_.registry.jobs()) gone = gone && !rotates_on(job, d);
  if (!capacity || gone) {
    if (track.current) spdlog::info("rotation ends device={}: no jobs take turns", d);
    broker_.rotation.erase(d);
    return;
  }

  // The numbers: what is not rotating memory (production, what cannot move, production waiting
  // for room) is taken off the capacity first.
  const DeviceMemoryUse use = device_use(parts_.registry, d);
  uint64_t rotating_on_device = 0, waiting = 0;
  policies::RotationState state;
  std::vector<RotatingJob> jobs;
  for (auto& [id, job] : parts_.registry.jobs()) {
    if (!rotates_on(job, d)) continue;
    const JobMemory& m = job.memory_state;
    const uint64_t on_device = job_swappable_resident(job, d);
    rotating_on_device += on_device;
    const bool resident = m.state == SwapState::resident || m.state == SwapState::swapping_in ||
                          m.state == SwapState::prefetched;
    const uint64_t bytes = job_swappable(job, d);
    DeviceRotation::Growth& growth = track.growth[id];
    if (bytes > growth.peak) {
      growth.peak = bytes;
      growth.grew_at = now;
    }
    state.jobs.push_back({id, bytes, m.reward, swap_in_seconds(job, d), id, resident, growth.peak,
                          now - growth.grew_at < parts_.config.memory.rotation.growth_quiet});
    const bool moving = m.state == SwapState::swapping_in || m.state == SwapState::swapping_out;
    const bool overdue = moving && now - m.requested > parts_.config.memory.swap_timeout;
    if (overdue)
      hooks_.warn("job=" + std::to_string(id) + " rotation overdue",
                  "rotation device=" + std::to_string(d) + " job=" + log_text(job.name) +
                      " id=" + std::to_string(id) + " pid=" + std::to_string(job.peer.pid) +
                      ": its move (" + swap_state_name(m.state) + ") is not acknowledged after " +
                      std::to_string(parts_.config.memory.swap_timeout.count()) +
                      " ms; the other jobs take their turns without it");
    jobs.push_back({id, m.state, job_swappable(job, d), on_device, overdue});
  }
  std::erase_if(track.growth, [&](const auto& entry) {
    return std::none_of(jobs.begin(), jobs.end(),
                        [&](const RotatingJob& job) { return job.job_id == entry.first; });
  });
  for (const PendingAdmission& p : broker_.pending)
    if (p.device == d) waiting += p.bytes;
  state.capacity_bytes = *capacity;
  state.production_bytes = use.resident - std::min(use.resident, rotating_on_device) + waiting;
  state.current = track.current;
  state.turn_elapsed_s =
      track.running_since ? std::chrono::duration<double>(now - *track.running_since).count() : 0;
  // A job whose move is overdue cannot run: its turn passes at once.
  for (const RotatingJob& job : jobs)
    if (job.overdue && state.current == job.job_id)
      state.turn_elapsed_s = std::numeric_limits<double>::infinity();
  state.previous_order = track.last.order;

  const RotationConfig& config = parts_.config.memory.rotation;
  const policies::RotationParameters parameters = config.parameters([&](const std::string& name) {
    std::vector<uint64_t> ids;  // the registry is ordered by id: registration order
    for (auto& [id, job] : parts_.registry.jobs())
      if (job.name == name) ids.push_back(id);
    return ids;
  });
  const policies::RotationDecision decision = policies::decide_rotation(state, parameters);

  pass_turn(d, decision, parts_.registry, track);
  track.last = decision;

  const RotationRoom room{*capacity, use.resident, waiting > 0};
  carry_out(d, rotation_steps(decision, jobs, room), parts_.registry, track, now);
  // The turn counts from when its job runs, not from when it was given: the copies that could
  // not be hidden do not shorten it.
  if (track.current && !track.running_since) {
    const Job* head = parts_.registry.find(*track.current);
    if (head && head->memory_state.state == SwapState::resident) track.running_since = now;
  }
}

nlohmann::json MemoryService::rotation_json(int device) const {
  auto it = broker_.rotation.find(device);
  if (it == broker_.rotation.end() || !it->second.last.rotating) return nullptr;
  const DeviceRotation& track = it->second;
  const policies::RotationDecision& last = track.last;
  return {{"order", last.order},
          {"current", track.current ? nlohmann::json(*track.current) : nlohmann::json(nullptr)},
          {"running", last.run},
          {"prefetch", last.prefetch ? nlohmann::json(*last.prefetch) : nlohmann::json(nullptr)},
          {"prefetch_bytes", last.prefetch_bytes},
          {"waiting_too_large", last.too_large},
          {"turn_s", last.turn_s},
          {"budget_bytes", last.budget_bytes}};
}

}  // namespace gpushare::daemon
