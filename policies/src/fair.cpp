// `fair`: weighted equal share among the jobs of one class (DESIGN.md §3), in GPU time where the
// shims report busy time, else in launches (see class_sharing.h). Classes are not ranked against
// each other here: protecting production is what `tgs` and `priority` are for.
#include "catalog.h"
#include "class_sharing.h"

namespace gpushare::policies {
namespace {

const ParameterSpec kParameters[] = {
    {"headroom", 0.05, 0.01, 1.0,
     "fraction above last window's use that a job that wants no more (and, counted in launches, "
     "the class) may grow into in the next window"},
};

class FairPolicy final : public Policy {
 public:
  explicit FairPolicy(const Parameters& p) : sharing_(p.at("headroom")) {}

  std::string_view name() const override { return "fair"; }

  std::vector<Gate> decide(const DeviceObservation& device) override {
    sharing_.observe(device);
    std::vector<Gate> gates(device.jobs.size());
    for (size_t i = 0; i < device.jobs.size(); ++i) gates[i].job_id = device.jobs[i].job_id;
    for (JobClass job_class : {JobClass::production, JobClass::opportunistic})
      sharing_.share(device, job_class, gates);
    return gates;
  }

 private:
  ClassSharing sharing_;
};

}  // namespace

std::span<const ParameterSpec> fair_parameters() {
  return kParameters;
}

std::unique_ptr<Policy> make_fair(const Parameters& resolved) {
  return std::make_unique<FairPolicy>(resolved);
}

}  // namespace gpushare::policies
