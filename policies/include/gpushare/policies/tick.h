// One tick of one device, written once for gpushared and gpushare-sim: the jobs' cumulative
// counters become the window's observations, the policy decides, and each gate becomes the values
// written into that job's control block.
//
// The daemon reads the counters from memory its clients can scribble on, so `observe` trusts
// nothing: a counter that went backwards counts as no work, completions never pass launches, an
// in-flight count is passed on only when it is current. The simulator's counters are exact and
// go through the same code, so what the simulator predicts is what the daemon would decide.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "job_class.h"
#include "policy.h"

namespace gpushare::policies {

// A job's counters at the end of a window, as its control block holds them (cumulative), plus
// this window's measured times where something measures them.
struct JobCounters {
  uint64_t job_id = 0;
  JobClass job_class = JobClass::opportunistic;
  double weight = 1.0;
  uint64_t launches = 0;
  uint64_t gate_waits = 0;
  std::optional<uint64_t> completed_launches = std::nullopt;  // the last completed launch number
  // Kernels in flight as last published. The shim publishes it at each launch it makes under a
  // bound, so it is current only where `in_flight_exact` or a bound was in force and the job
  // launched in this window.
  std::optional<uint32_t> in_flight = std::nullopt;
  bool in_flight_exact = false;  // the simulator knows it; the daemon does not
  bool bounded = false;          // a bound on in-flight kernels was in force in this window
  std::optional<uint64_t> busy_ns = std::nullopt;       // this window's GPU time
  std::optional<uint64_t> in_flight_ns = std::nullopt;  // this window's time with work in flight
  std::optional<uint64_t> paced_in_flight_ns = std::nullopt;  // JobObservation's
  bool mps_client = false;  // JobObservation::mps_client
};

// The in-flight time a production job's completions took (JobCounters::paced_in_flight_ns), for
// gpushared (its idle relay samples the control block every 250 µs) and gpushare-sim (every
// kernel's end) alike: samples credit the job's busy time, and the time up to the sample that saw
// its completed count move is the time of the completions counted so far. A tick reads the count as
// of that sample with the busy time between it and the previous tick's: its completions over the
// time they took, where a count and busy time cut at the tick make a job of few completions a
// window (one CUDA graph an iteration, 3-6 a 50 ms window) jump by whole completions (on the H100,
// 2026-12-07: a pair of periods of graph-captured resnet50 b8 training spread 0.127 in log speed
// counted per window, 0.090 paced, over 37 pairs; resnet50 b8 without graphs 0.144 both ways,
// over 20).
class CompletionPace {
 public:
  struct Reading {
    uint64_t completed = 0;     // the count at the last sample that saw it move
    uint64_t in_flight_ns = 0;  // busy time up to that sample since the previous reading's
  };
  // One relay sample: the count read then, and the busy time credited to the job at it.
  void sample(std::optional<uint64_t> completed, uint64_t credited_ns);
  // A tick's reading; none before the count is first seen.
  std::optional<Reading> take();

 private:
  uint64_t in_flight_ns_ = 0;  // all the busy time credited
  std::optional<uint64_t> completed_;
  uint64_t in_flight_at_completion_ns_ = 0;
  uint64_t taken_ns_ = 0;  // in_flight_at_completion_ns_ at the last reading
};

// What a tick remembers of a job between windows.
struct JobHistory {
  bool first = true;  // no window yet: the first sample only sets the baseline
  uint64_t launches = 0;
  uint64_t gate_waits = 0;
  std::optional<uint64_t> completed = std::nullopt;
};

// What a tick writes into one job's control block.
struct JobControl {
  uint64_t job_id = 0;
  uint64_t allowance = kUnlimited;
  bool paused = false;
  // Production jobs never get a bound: their launches must not wait on their own queue.
  uint32_t max_in_flight = 0;
  bool production_idle_only = false;  // opportunistic jobs only, as the bound
};

// The window's observation of one job, and the history moved on to this sample.
JobObservation observe(JobHistory& history, const JobCounters& counters, uint64_t window_ns);

// The control block values that carry out `gate` for a job that has counted `launches_so_far`.
JobControl control_for(const Gate& gate, JobClass job_class, uint64_t launches_so_far);

struct DeviceTick {
  DeviceObservation observation;
  std::vector<Gate> gates;           // as the policy returned them
  std::vector<JobControl> controls;  // one per gate whose job was observed, in the gates' order
};

// Observes every job of a device (`history[i]` belongs to `jobs[i]`), lets `policy` decide, and
// turns its gates into control values: the whole tick where jobs have one device (the
// simulator). The daemon, whose jobs may span devices, observes each job once, lets each of its
// devices' policies decide, and turns the strictest of their gates into control values with the
// same observe and control_for.
DeviceTick tick_device(Policy& policy, const std::vector<JobCounters>& jobs,
                       const std::vector<JobHistory*>& history, uint64_t now_ns,
                       uint64_t window_ns);

}  // namespace gpushare::policies
