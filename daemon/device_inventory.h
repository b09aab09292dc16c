// Which device indices exist, as far as the daemon can tell without NVML: the character devices
// /dev/nvidia0, /dev/nvidia1, … the driver creates, and the devices shims have reported or jobs
// use. Used to refuse `gpusharectl policy 7 …` on a machine with two GPUs.
#pragma once

#include <optional>
#include <set>
#include <string>

namespace gpushare::daemon {

// The N of every /dev/nvidiaN under `dev_dir` (nvidiactl, nvidia-uvm etc. are not devices).
std::set<int> nvidia_device_nodes(const std::string& dev_dir = "/dev");

// Why `device` is refused, or nullopt. With nothing known (no device nodes, no device reported,
// e.g. the fake driver before any job) every index is accepted: there is nothing to check it
// against, and a policy may be chosen before the first job arrives.
std::optional<std::string> unknown_device(int device, const std::set<int>& nodes,
                                          const std::set<int>& seen);

}  // namespace gpushare::daemon
