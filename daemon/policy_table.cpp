#include "policy_table.h"

#include <utility>

namespace gpushare::daemon {

void PolicyTable::configure(const Config& config) {
  default_policy_ = config.default_policy;
  device_policies_ = config.device_policies;
  file_parameters_ = config.policy_parameters;
  chosen_.clear();
}

void PolicyTable::choose(int device, std::string name, policies::Parameters parameters) {
  chosen_[device] = PolicyChoice{std::move(name), std::move(parameters)};
}

PolicyChoice PolicyTable::choice_for(int device) const {
  if (auto it = chosen_.find(device); it != chosen_.end()) return it->second;
  PolicyChoice choice{policy_for(device), {}};
  if (auto p = file_parameters_.find(choice.name); p != file_parameters_.end())
    choice.parameters = p->second;
  return choice;
}

const std::string& PolicyTable::policy_for(int device) const {
  if (auto it = chosen_.find(device); it != chosen_.end()) return it->second.name;
  if (auto it = device_policies_.find(device); it != device_policies_.end()) return it->second;
  return default_policy_;
}

std::set<int> PolicyTable::devices() const {
  std::set<int> devices;
  for (const auto& [device, name] : device_policies_) devices.insert(device);
  for (const auto& [device, choice] : chosen_) devices.insert(device);
  return devices;
}

}  // namespace gpushare::daemon
