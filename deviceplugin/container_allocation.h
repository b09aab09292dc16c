// What Allocate returns for one container: the mounts and environment that put the container's
// CUDA programs under libgpushare.so, talking to the node's gpushared, on the GPUs its shares
// belong to. A pure function of the plugin's settings and the kubelet's request.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpushare::deviceplugin {

struct AllocationSettings {
  std::string library;     // host path of libgpushare.so; its folder is mounted at the same path
  std::string socket_dir;  // host folder of gpushared.sock, mounted read-only at the same path
  std::string socket_name = "gpushared.sock";
  bool cdi = false;                         // also name the GPUs as CDI devices
  std::string cdi_kind = "nvidia.com/gpu";  // CDI vendor/class of the GPUs
};

struct Mount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const Mount&) const = default;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::vector<std::string> cdi_devices;  // fully qualified: "nvidia.com/gpu=GPU-…"
};

// `priority`: "production" or "opportunistic", what the shim asks for (the daemon decides);
// `gpus`: the GPUs of the container's shares (shares.h); `token_host_path`: the allocation's
// token file (gpushare/protocol/pod_allocation.h), mounted at kAllocationTokenPath.
ContainerAllocation container_allocation(const AllocationSettings& settings,
                                         const std::string& priority,
                                         const std::vector<std::string>& gpus,
                                         const std::string& token_host_path);

// "a,b,c": the form NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES and the log lines use.
std::string joined(const std::vector<std::string>& items);

}  // namespace gpushare::deviceplugin
