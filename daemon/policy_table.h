// Which policy each device runs, and with which parameters: the config file's (`policy.devices`,
// else `policy.default`, with `policy.parameters` of that policy), unless `gpusharectl policy`
// chose another for the device; such a choice holds until the next reload, where the file
// decides again (docs/daemon.md). The scheduler asks it every tick; the ctl and /metrics show it.
#pragma once

#include <map>
#include <set>
#include <string>

#include "config.h"
#include "scheduler.h"

namespace gpushare::daemon {

class PolicyTable {
 public:
  // At start and at each reload: the file's choices, and no runtime choice.
  void configure(const Config& config);
  // `gpusharectl policy DEVICE NAME [PARAMETERS]`: `parameters` replace the file's for this
  // device (none given: the policy's defaults).
  void choose(int device, std::string name, policies::Parameters parameters);

  PolicyChoice choice_for(int device) const;
  const std::string& policy_for(int device) const;
  // The devices the file or a runtime choice names.
  std::set<int> devices() const;

 private:
  std::string default_policy_ = "none";
  std::map<int, std::string> device_policies_;                   // from the file
  std::map<std::string, policies::Parameters> file_parameters_;  // from the file, by policy
  std::map<int, PolicyChoice> chosen_;                           // by gpusharectl, until reload
};

}  // namespace gpushare::daemon
