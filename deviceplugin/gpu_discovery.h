// The node's GPUs as the NVIDIA kernel driver lists them: one folder per GPU (by PCI bus id)
// under /proc/driver/nvidia/gpus, whose "information" file has a "GPU UUID:" line. No NVML, so
// the plugin needs neither the CUDA driver nor a GPU of its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare::deviceplugin {

// The UUID of one "information" file's text, or none.
std::optional<std::string> uuid_from_information(std::string_view text);

// Every GPU's UUID, in PCI bus order; *problems names folders that gave none.
std::vector<std::string> discover_gpus(const std::string& info_dir,
                                       std::vector<std::string>* problems);

}  // namespace gpushare::deviceplugin
