#include "device_inventory.h"

#include <filesystem>

namespace gpushare::daemon {

std::set<int> nvidia_device_nodes(const std::string& dev_dir) {
  std::set<int> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, error)) {
    std::string name = entry.path().filename().string();
    if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0 || name.size() > 10) continue;
    std::string digits = name.substr(6);
    if (digits.find_first_not_of("0123456789") == std::string::npos)
      found.insert(std::stoi(digits));
  }
  return found;
}

std::optional<std::string> unknown_device(int device, const std::set<int>& nodes,
                                          const std::set<int>& seen) {
  if (nodes.count(device) || seen.count(device) || (nodes.empty() && seen.empty()))
    return std::nullopt;
  std::string known;
  std::set<int> all = nodes;
  all.insert(seen.begin(), seen.end());
  for (int d : all) known += (known.empty() ? "" : ", ") + std::to_string(d);
  return "device " + std::to_string(device) + " does not exist (devices: " + known + ")";
}

}  // namespace gpushare::daemon
