// The daemon's side of rate control: every tick, each device's policy (policies/) gets
// what its jobs did in the window that just ended, and its gates are written into their control
// blocks. The policy is a pure function of those observations; this file is the I/O around it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gpushare/policies/policy.h"
#include "gpushare/policies/tick.h"
#include "production_activity.h"
#include "registry.h"

namespace gpushare::daemon {

struct PolicyChoice {
  std::string name = "none";
  policies::Parameters parameters;
};

// Production jobs record a completion mark every `stride` launches (shim/completions.h). At most
// every 32 launches (~1 µs of event record per 32 launches: ~500 marks a second for a resnet50
// training job on an H100); fewer launches per window get a finer stride, so that a window still
// sees several marks: a job launching 6 kernels per window with a stride of 32 completed 0 or 32
// per window, and the fake-driver test of production with gaps saw that noise as harm.
inline constexpr uint32_t kLargestCompletionStride = 32;
// The stride for a job that launched `launches` in the last window, given the one in force:
// the largest power of two up to launches / 8, in [1, 32], changed only when it is off by 4x
// (a stride change restarts the shim's marks); an idle window keeps it.
uint32_t completion_stride_for(uint64_t launches, uint32_t current);

// Kernel-level idle gating (Gate::production_idle_only): on a device where an opportunistic job
// waits for production to be idle, production's completion marks come at least every 4 launches
// (so at most 3 launches of a burst's tail are covered only by the quiet time of
// ProductionActivity) and its poller publishes them every 250 µs; the idle relay samples the
// blocks every 250 µs.
inline constexpr uint32_t kIdleGatingStride = 4;
inline constexpr uint32_t kIdleGatingPollUs = 250;
inline constexpr std::chrono::microseconds kIdleRelayPeriod{250};
// The times the relay asks ProductionActivity with: its own period as the sample period.
inline constexpr ActivityTimes kRelayActivityTimes{
    .sample_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(kIdleRelayPeriod).count())};

// How a production job's completions are marked (stride) and published (poll period; 0: the
// shim's default), given its launches in the last window, the stride in force, whether an
// opportunistic job on its devices waits for it to be idle (`idle_gated`) and whether the policy
// reads its busy time there (`measured`). Only an idle-gated neighbour needs the fine stride: it
// is released the moment production's last kernel is done, and a burst's unmarked tail holds it
// for the quiet time. Measuring busy time needs the frequent polls (a completion published late
// is busy time that was not) but not the fine stride: a launch counts as busy when it is made,
// and the load's stride still gives a window 16 marks or more. The concurrency budget measures
// production in every period, so with a stride of 4 in all of them a launch-bound job recorded an
// event every 4 launches for as long as an opportunistic job shared its GPU. Pure.
struct CompletionMarks {
  uint32_t stride = 0;
  uint32_t poll_us = 0;
};
CompletionMarks completion_marks_for(uint64_t launches, uint32_t current, bool idle_gated,
                                     bool measured);

// The gates this daemon's shim carries out (policies::make_policy refuses a choice needing more).
inline constexpr policies::Capabilities kShimCapabilities{.kernel_idle_gating = true};

// The gate of a job that runs on several devices, from the gates their policies gave it: the
// strictest of each (paused if any pauses it, the fewest launches, the smallest in-flight bound,
// idle-gated if any gates it), since one control block gates all of the process's launches.
policies::Gate strictest_gate(const std::vector<policies::Gate>& gates);

class Scheduler {
 public:
  // Samples every job's counters, decides per device, writes gates that changed. `choice_for`
  // names the policy in force on a device; a change of name or parameters starts a fresh policy.
  void tick(Registry& registry, Clock::time_point now,
            const std::function<PolicyChoice(int device)>& choice_for);

  // The devices a job is scheduled on: those it holds memory on, else those it may use
  // (Job::devices_in_use), else device 0 (a job for any device).
  static std::vector<int> devices_of(const Job& job);
  // The first of them: the one device /metrics labels a job with.
  static int device_of(const Job& job) { return devices_of(job).front(); }

  // Whether some opportunistic job's gate is production_idle_only or some policy measures
  // production's busy time (Gate::measure_production): the idle relay must run.
  bool relaying() const { return !relayed_.empty(); }
  // The idle relay, every kIdleRelayPeriod while relaying(): samples the production jobs of
  // each relayed device (their busy time) and holds its idle-gated jobs while any of them is busy.
  void relay(Registry& registry, Clock::time_point now);

  // What the last tick decided on a device that had jobs (for /metrics).
  struct DeviceStatus {
    // Launches per second the opportunistic jobs were allowed together (+inf: unlimited); none
    // without opportunistic jobs.
    std::optional<double> opportunistic_limit_per_second;
    std::optional<double> production_progress;  // the policy's estimate, where it has one
  };
  const std::map<int, DeviceStatus>& device_status() const { return status_; }
  // The policy's own account of its state on a device (Policy::explain: the concurrency budget's
  // costs, gains and shares), for `gpusharectl status`; "" where it gives none or none runs there.
  std::string explain(int device) const;

 private:
  struct DevicePolicy {
    PolicyChoice choice;
    std::unique_ptr<policies::Policy> policy;
  };
  struct Seen {
    policies::JobHistory history;  // the counters at the last tick (policies/tick.h)
    uint64_t allowance = protocol::kUnlimited;
    bool paused = false;
    uint32_t max_in_flight = 0;
    uint32_t completion_stride = 0;
    uint32_t completion_poll_us = 0;
    bool held_for_production = false;  // kPausedWhileProductionBusy set by the relay
    uint64_t in_flight_ns = 0;         // production: time the relay saw it busy since the tick
    bool relayed = false;              // production: the relay sampled it since the tick
    policies::CompletionPace pace;     // production: its completions as the relay timed them
  };
  DevicePolicy* policy_for(int device, const PolicyChoice& choice);

  std::map<int, DevicePolicy> devices_;
  std::map<uint64_t, Seen> seen_;  // by job id
  // Per relayed device (idle-gated jobs, or a policy measuring production's busy time), from the
  // last tick: its production jobs and its idle-gated opportunistic jobs (ids: the relay looks
  // them up, a job may have left since).
  struct RelayedDevice {
    std::vector<uint64_t> production;
    std::vector<uint64_t> gated;
  };
  std::map<int, RelayedDevice> relayed_;
  std::map<uint64_t, ProductionActivity> activity_;  // by production job id
  Clock::time_point last_relay_{};
  std::map<int, DeviceStatus> status_;  // by device, from the last tick
  Clock::time_point last_tick_{};
};

}  // namespace gpushare::daemon
