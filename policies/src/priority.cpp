// `priority`: opportunistic work runs only in production's idle gaps (DESIGN.md §3, mechanism 1,
// Tally's scheduling rule without its kernel rewriting).
//
// Production is idle when no production job launched anything in a window and none has kernels in
// flight. Once production has been idle for `min_idle_ms`, opportunistic jobs are released with at
// most `in_flight` kernels each on the GPU, so that a production kernel arriving at the end of the
// gap waits behind a short queue, not a backlog. The first window in which production launches
// again pauses them for the next window. With `kernel_gating`, they are never paused but may
// launch only while production has nothing in flight (Gate::production_idle_only, checked by the
// shim per launch): that reacts within a kernel, not a window, and fills gaps shorter than one.
#include "catalog.h"
#include "class_sharing.h"

namespace gpushare::policies {
namespace {

const ParameterSpec kParameters[] = {
    {"min_idle_ms", 50, 0, 10'000,
     "production must have been idle this long before opportunistic work runs; counted in whole "
     "windows, so at least one window"},
    {"in_flight", 2, 1, 1024, "kernels each opportunistic job may have in flight while released",
     true},
    {"kernel_gating", 0, 0, 1,
     "1: while production is busy, let the shim release opportunistic launches whenever production "
     "has nothing in flight, instead of pausing them until the next idle window",
     true, Needs::kernel_idle_gating},
};

// Growth allowed to an opportunistic job that left part of its share unused (the `fair` default).
constexpr double kSharingHeadroom = 0.05;

class PriorityPolicy final : public Policy {
 public:
  explicit PriorityPolicy(const Parameters& p)
      : min_idle_ns_(static_cast<uint64_t>(p.at("min_idle_ms") * 1e6)),
        in_flight_(static_cast<uint32_t>(p.at("in_flight"))),
        kernel_gating_(p.at("kernel_gating") != 0) {}

  std::string_view name() const override { return "priority"; }

  std::vector<Gate> decide(const DeviceObservation& device) override {
    bool production_busy = false;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::production && !is_idle(job)) production_busy = true;
    production_idle_ns_ = production_busy ? 0 : production_idle_ns_ + device.window_ns;
    // At least one whole idle window, whatever min_idle_ms says: a window with production
    // launches in it is not a gap.
    const bool release = !production_busy && production_idle_ns_ >= min_idle_ns_;

    sharing_.observe(device);
    std::vector<Gate> gates;
    gates.reserve(device.jobs.size());
    for (const JobObservation& job : device.jobs) {
      Gate gate{.job_id = job.job_id};
      if (job.job_class == JobClass::opportunistic) {
        // With kernel gating the shim's per-launch check subsumes the window's: a released job
        // still stops launching the moment production has work in flight again.
        gate.paused = !release && !kernel_gating_;
        gate.production_idle_only = kernel_gating_;
        gate.max_in_flight = in_flight_;
      }
      gates.push_back(gate);
    }
    // Several opportunistic jobs share the gaps by weight.
    if (release || kernel_gating_) sharing_.share(device, JobClass::opportunistic, gates);
    return gates;
  }

 private:
  uint64_t min_idle_ns_;
  uint32_t in_flight_;
  bool kernel_gating_;
  uint64_t production_idle_ns_ = 0;  // how long production has been idle, in whole windows
  ClassSharing sharing_{kSharingHeadroom};
};

}  // namespace

std::span<const ParameterSpec> priority_parameters() {
  return kParameters;
}

std::unique_ptr<Policy> make_priority(const Parameters& resolved) {
  return std::make_unique<PriorityPolicy>(resolved);
}

}  // namespace gpushare::policies
