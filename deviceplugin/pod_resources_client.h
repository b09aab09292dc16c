// The kubelet's PodResources API (v1 List): which container of which pod holds which device ids.
// Only the containers holding one of `resources` are kept.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "allocation_map.h"

namespace gpushare::deviceplugin {

// None with *error when the kubelet did not answer within the deadline.
std::optional<std::vector<PodContainer>> list_pod_resources(
    const std::string& socket, const std::vector<std::string>& resources, std::string* error);

}  // namespace gpushare::deviceplugin
