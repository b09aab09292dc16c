// A recording as a memory case (memory_replay.h): static helpers for the time sums, then one
// function that builds the case.
#include "memory_replay.h"

#include <algorithm>
#include <set>

namespace gpushare::sim {
namespace {

double overlap(const Interval& a, const Interval& b) {
  return std::max(0.0, std::min(a.second, b.second) - std::max(a.first, b.first));
}

// The time between two bursts that the job could have computed: the gap less its pauses.
double idle_between(const RecordedJob& job, const Interval& gap) {
  double paused = 0;
  for (const Interval& p : job.paused) paused += overlap(p, gap);
  return std::max(0.0, (gap.second - gap.first) - paused);
}

// Bytes over seconds of the swaps in one direction; 0 when none was measured.
double rate(const std::vector<RecordedSwap>& swaps, bool to_device) {
  double bytes = 0, seconds = 0;
  for (const RecordedSwap& s : swaps)
    if (s.to_device == to_device && s.bytes > 0 && s.seconds > 0)
      bytes += static_cast<double>(s.bytes), seconds += s.seconds;
  return seconds > 0 ? bytes / seconds : 0;
}

}  // namespace

std::string replay_case(const Recording& recording, Replay& replay) {
  if (!recording.capacity_bytes) return "the trace names no capacity for the device";
  MemoryCase& out = replay.memory_case;
  out = MemoryCase{};
  out.capacity_bytes = *recording.capacity_bytes;
  out.host_to_device_bytes_per_s = rate(recording.swaps, true);
  out.device_to_host_bytes_per_s = rate(recording.swaps, false);
  if (out.host_to_device_bytes_per_s <= 0)
    return "the trace has no swap to the device with bytes and time: the host-to-device rate "
           "cannot be measured";
  if (out.device_to_host_bytes_per_s <= 0)
    out.device_to_host_bytes_per_s = out.host_to_device_bytes_per_s;

  double first = 0, last = 0;
  bool any = false;
  std::set<std::string> names;
  for (const RecordedJob& job : recording.jobs) {
    const bool takes_turns = !job.production && job.swappable > 0 && !job.bursts.empty();
    // What never moves stays on the device for the whole run, like production's memory.
    out.production_bytes +=
        takes_turns ? job.bytes - std::min(job.bytes, job.swappable) : job.bytes;
    if (!takes_turns) continue;
    MemoryJob step_job;
    step_job.name =
        names.insert(job.name).second ? job.name : job.name + "#" + std::to_string(job.id);
    names.insert(step_job.name);
    double compute = 0, idle = 0;
    for (size_t k = 0; k < job.bursts.size(); ++k) {
      const Interval& burst = job.bursts[k];
      compute += std::max(burst.second - burst.first, recording.tick_s);
      if (k > 0) idle += idle_between(job, {job.bursts[k - 1].second, burst.first});
      first = any ? std::min(first, burst.first) : burst.first;
      last = any ? std::max(last, burst.second) : burst.second;
      any = true;
    }
    const double steps = static_cast<double>(job.bursts.size());
    step_job.compute_s = compute / steps;
    step_job.idle_s = job.bursts.size() > 1 ? idle / (steps - 1) : 0;
    step_job.bytes = job.swappable;
    step_job.steps = static_cast<uint32_t>(job.bursts.size());
    step_job.arrival = out.jobs.size();
    out.jobs.push_back(step_job);
  }
  if (out.jobs.empty())
    return "the trace has no opportunistic job with swappable memory and launches on the device";
  replay.measured_makespan_s = last - first;
  return {};
}

}  // namespace gpushare::sim
