// `none`: accounting and visibility only. Every job runs unlimited; the daemon still samples the
// counters, so gpusharectl shows rates as under any other policy.
#include "catalog.h"

namespace gpushare::policies {
namespace {

class NonePolicy final : public Policy {
 public:
  std::string_view name() const override { return "none"; }
  std::vector<Gate> decide(const DeviceObservation& device) override {
    std::vector<Gate> gates;
    gates.reserve(device.jobs.size());
    for (const JobObservation& job : device.jobs) gates.push_back(Gate{.job_id = job.job_id});
    return gates;
  }
};

}  // namespace

std::span<const ParameterSpec> none_parameters() {
  return {};
}

std::unique_ptr<Policy> make_none(const Parameters&) {
  return std::make_unique<NonePolicy>();
}

}  // namespace gpushare::policies
