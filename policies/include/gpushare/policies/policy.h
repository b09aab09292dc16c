// The policy interface: pure decisions from what the daemon observed in one tick window to the gate
// each job gets for the next window (DESIGN.md §3, docs/policies.md).
//
// A policy has no clock and does no I/O: the daemon (and the simulator in tools/sim) samples every
// job's control block at the end of a window, builds a DeviceObservation and calls decide(). The
// policy keeps whatever it learns (rate estimates, control state) in its own members, so the same
// sequence of observations always yields the same sequence of gates.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job_class.h"

namespace gpushare::policies {


// What the daemon saw of one job during the window that just ended.
struct JobObservation {
  uint64_t job_id = 0;
  JobClass job_class = JobClass::opportunistic;
  double weight = 1.0;  // share among jobs of the same class; must be > 0
  // Kernel launches counted in this window (difference of the control block's `launches`).
  uint64_t launches = 0;
  // Launches that had to wait at the gate in this window: the job wanted more than it was allowed.
  uint64_t gate_waits = 0;
  // GPU time of this job's kernels in this window, where the shim measures it (events).
  std::optional<uint64_t> busy_ns = std::nullopt;
  // Kernels launched but not yet known complete at the end of the window, where the shim tracks it.
  std::optional<uint32_t> in_flight = std::nullopt;
  // Kernels the GPU finished in this window, where the shim publishes completion marks (the
  // daemon asks production jobs to): a signal that follows the GPU, where launches follow the CPU.
  std::optional<uint64_t> completed = std::nullopt;
  // Time in this window during which the job had work on the GPU, for production jobs on a device
  // with kernel-level idle gating (the daemon's idle relay samples it every 250 µs).
  std::optional<uint64_t> in_flight_ns = std::nullopt;
  // The time with work in flight that this window's completions took: from the previous window's
  // last completion the relay saw to this one's (the relay's clock, not the window's), where the
  // relay samples the job. A job that completes few marks a window (one CUDA graph an
  // iteration: 3-6 a 50 ms window) makes its completions per window jump by whole marks, ±1 of
  // 5 a 20 % swing of the speed in flight; completions over the time they took do not. A window
  // without completions has none: its time goes to the next that has.
  std::optional<uint64_t> paced_in_flight_ns = std::nullopt;
  // The job is a client of the daemon's MPS server (docs/mps.md): its kernels can run beside the
  // other clients', an opportunistic one at client priority 1. Fixed at the job's first cuInit.
  bool mps_client = false;
};

struct DeviceObservation {
  uint64_t now_ns = 0;     // the daemon's monotonic clock at the end of the window
  uint64_t window_ns = 0;  // length of the window the counts cover; decide() ignores a 0 window
  std::vector<JobObservation> jobs = {};
};

// The gate one job gets for the next window.
struct Gate {
  uint64_t job_id = 0;
  uint64_t launches = kUnlimited;  // launches allowed in the next window, or kUnlimited
  bool paused = false;             // hold every launch
  uint32_t max_in_flight = 0;      // bound on kernels in flight; 0 means no bound
  // Launch only while no production job on the device has kernels in flight: idle-gated launching
  // at kernel granularity (DESIGN.md §3, mechanism 1). The shim must check it per launch against
  // the production jobs' published in-flight counts; the tick alone cannot see gaps shorter than
  // a window.
  bool production_idle_only = false;
  // The policy reads the production jobs' busy time on this device (JobObservation::in_flight_ns)
  // even while no job is idle-gated: the daemon's idle relay keeps sampling them.
  bool measure_production = false;
};

// A job launched nothing in the window and has nothing queued on the GPU. Without an in-flight
// count, "launched nothing" is all we know.
inline bool is_idle(const JobObservation& job) {
  return job.launches == 0 && job.in_flight.value_or(0) == 0;
}

// The control block's `allowance` is the cumulative launch number a job may reach
// (protocol/include/gpushare/protocol/control_block.h). Converts "this many launches in the next
// window" into that value. Launches already counted but waiting at the gate (at most one per
// blocked thread) are released too: the counter includes them. Saturates instead of wrapping.
inline uint64_t allowance_for(uint64_t launches_so_far, uint64_t launches_in_window) {
  if (launches_in_window == kUnlimited) return kUnlimited;
  if (launches_in_window >= kUnlimited - launches_so_far) return kUnlimited - 1;
  return launches_so_far + launches_in_window;
}

// What the daemon writes into a job's control block for a gate. A gate of 0 launches pauses the
// job: an allowance equal to the count would still release the launches already waiting.
struct ControlValues {
  uint64_t allowance = kUnlimited;
  bool paused = false;
};

inline ControlValues control_values(const Gate& gate, uint64_t launches_so_far) {
  return ControlValues{allowance_for(launches_so_far, gate.launches),
                       gate.paused || gate.launches == 0};
}

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // One gate per job of `device`, in the same order. Jobs not seen before are new; jobs missing
  // from `device` are gone and their state is dropped.
  virtual std::vector<Gate> decide(const DeviceObservation& device) = 0;
  // The policy's latest estimate of the slowest production job's rate over its solo rate (the
  // daemon's /metrics shows it); none where the policy keeps no such estimate.
  virtual std::optional<double> production_progress() const { return std::nullopt; }
  // What the policy's last decision rested on, for the daemon's trace log and `gpusharectl
  // status` (empty: nothing more than the gates say). Called where the trace is written (every
  // tick) and once a ctl request.
  virtual std::string explain() const { return {}; }
};

// Named numeric parameters, e.g. {"target", 0.9}; from the config file or `gpusharectl policy`.
using Parameters = std::map<std::string, double, std::less<>>;

// What a parameter set away from its default needs from the system that carries out the gates,
// beyond the policy itself.
enum class Needs { nothing, kernel_idle_gating };

struct ParameterSpec {
  std::string_view name;
  double default_value;
  double min;
  double max;
  std::string_view meaning;
  bool whole_number = false;  // counts and switches: 2.5 is refused, not truncated
  Needs needs = Needs::nothing;
};

// What the caller of make_policy carries out. The simulator models every gate; the daemon says
// what its shim enforces, so that a policy depending on a gate the shim lacks is refused instead
// of running with its protection silently missing.
struct Capabilities {
  // Gate::production_idle_only: the shim holds a launch while production has kernels in flight.
  bool kernel_idle_gating = true;
};

struct MakePolicyResult {
  std::unique_ptr<Policy> policy;  // null when `error` says why
  std::string error;
};

// The registry: "tgs", "priority", "fair", "none". An unknown name, an unknown or out-of-range
// parameter, or one whose value needs what `capabilities` lacks gives a null policy and an error
// that names it.
MakePolicyResult make_policy(std::string_view name, const Parameters& parameters = {},
                             Capabilities capabilities = {});
std::vector<std::string_view> policy_names();
// The parameters a policy accepts, with defaults and ranges; empty for an unknown name.
std::vector<ParameterSpec> parameter_specs(std::string_view name);

// Parses "target=0.9,control_period_ms=100" (commas or spaces between pairs) into `parameters`.
// Returns an error message naming the bad pair, or an empty string.
std::string parse_parameters(std::string_view text, Parameters& parameters);

}  // namespace gpushare::policies
