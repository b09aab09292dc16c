// Visible devices: with the NVIDIA container runtime, NVIDIA_VISIBLE_DEVICES picks the GPUs the
// container gets and CUDA renumbers them from 0; a UUID in CUDA_VISIBLE_DEVICES names the same
// GPU whether or not the runtime renumbered, so UUIDs are used where the plugin knows them.
// With indices (tests, or --gpus 0,1) the container sees its GPUs as 0..n-1.
#include "container_allocation.h"

#include <filesystem>

#include "gpushare/protocol/pod_allocation.h"

namespace gpushare::deviceplugin {
namespace {


bool is_uuid(const std::string& gpu) {
  return gpu.rfind("GPU-", 0) == 0 || gpu.rfind("MIG-", 0) == 0;
}

}  // namespace

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

ContainerAllocation container_allocation(const AllocationSettings& settings,
                                         const std::string& priority,
                                         const std::vector<std::string>& gpus,
                                         const std::string& token_host_path) {
  ContainerAllocation a;
  std::string library_dir = std::filesystem::path(settings.library).parent_path().string();
  a.mounts.push_back({library_dir, library_dir, true});
  a.mounts.push_back({settings.socket_dir, settings.socket_dir, true});
  a.mounts.push_back({protocol::kAllocationTokenPath, token_host_path, true});

  a.envs["LD_PRELOAD"] = settings.library;
  a.envs["GPUSHARE_PRIORITY"] = priority;
  a.envs["GPUSHARE_SOCKET"] = settings.socket_dir + "/" + settings.socket_name;
  a.envs["NVIDIA_VISIBLE_DEVICES"] = joined(gpus);
  std::vector<std::string> cuda;
  for (size_t i = 0; i < gpus.size(); ++i)
    cuda.push_back(is_uuid(gpus[i]) ? gpus[i] : std::to_string(i));
  a.envs["CUDA_VISIBLE_DEVICES"] = joined(cuda);
  if (settings.cdi)
    for (const auto& gpu : gpus) a.cdi_devices.push_back(settings.cdi_kind + "=" + gpu);
  return a;
}

}  // namespace gpushare::deviceplugin
