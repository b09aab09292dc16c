// The trace format gpushare-sim replays (documented in docs/policies.md, "Simulator").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpushare/policies/policy.h"

namespace gpushare::sim {

// One job: a loop of iterations. An iteration launches `kernels_per_iteration` kernels, one every
// `launch_us` of CPU time, without waiting for them (up to `queue_depth` queued), then waits for
// all of them (a synchronisation such as loss.item()) and spends `iteration_gap_ms` on the CPU
// (data loading) before the next one. The job runs from `start_s` to `stop_s`; within that, if
// `on_s` is set, it alternates `on_s` seconds of work with `off_s` seconds of nothing.
struct JobSpec {
  std::string name;
  policies::JobClass job_class = policies::JobClass::opportunistic;
  double weight = 1;
  uint64_t kernel_ns = 0;
  double kernel_spread = 0;  // kernel durations uniform in kernel_ns * (1 ± spread)
  uint32_t kernels_per_iteration = 1;
  uint64_t launch_ns = 0;
  uint64_t iteration_gap_ns = 0;
  uint32_t queue_depth = 1024;
  uint64_t start_ns = 0;
  uint64_t stop_ns = 0;  // 0: until the end of the trace
  uint64_t on_ns = 0;    // 0: always on
  uint64_t off_ns = 0;

  // Whether the job's schedule has it working at `t` (ns from the start of the trace).
  bool scheduled_on(uint64_t t) const;
  // The next time at or after `t` when the job is scheduled on, or UINT64_MAX.
  uint64_t next_on(uint64_t t) const;
};

struct Trace {
  uint64_t duration_ns = 0;
  uint64_t tick_ns = 50'000'000;
  // How long one job keeps the engine while another has kernels waiting; 0 switches after every
  // kernel. Kernels never overlap and are never preempted (one engine, no MPS).
  uint64_t timeslice_ns = 0;
  bool report_busy = true;            // the shims measure their jobs' GPU time
  bool report_in_flight = true;       // the shims publish their jobs' in-flight kernel counts
  std::vector<std::string> policies;  // what to compare when the command line names none
  std::vector<JobSpec> jobs;
};

// Reads a trace from a JSON file. Returns an error message naming the file and the bad field, or
// an empty string.
std::string load_trace(const std::string& path, Trace& trace);

}  // namespace gpushare::sim
