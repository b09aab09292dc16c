// gpushare-device-plugin's command line, checked as a whole: every problem is one line naming
// the flag and what it expects, and the plugin does not start with any.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "container_allocation.h"

namespace gpushare::deviceplugin {

// One extended resource the plugin advertises, and the class its containers ask for.
struct ResourceClass {
  std::string priority;  // "production" or "opportunistic"
  std::string resource;  // "<prefix>/<priority>"
  std::string endpoint;  // socket file name in the device-plugins folder
  int shares_per_gpu = 0;
};

struct PluginOptions {
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string state_dir = "/var/lib/gpushare/device-plugin";
  std::string gpu_info_dir = "/proc/driver/nvidia/gpus";
  std::vector<std::string> gpus;  // empty: discovered from gpu_info_dir
  std::string resource_prefix = "gpushare.io";
  int production_shares = 2;
  int opportunistic_shares = 4;
  AllocationSettings allocation;
  int watch_interval_ms = 1000;          // how often the kubelet's socket is checked
  int pod_resources_interval_ms = 2000;  // how often PodResources is listed
  int token_grace_s = 300;               // an allocation no container holds lives this long
  std::string log_level = "info";
};

struct ParsedOptions {
  std::optional<PluginOptions> options;
  std::vector<std::string> errors;
  int exit_code = 0;  // for --help and --version: exit with this, no errors
  bool exit_now = false;
};

ParsedOptions parse_plugin_options(int argc, const char* const* argv);

// Checks values the parser cannot: paths absolute, resource names valid, GPU ids usable in a
// share id.
std::vector<std::string> check_plugin_options(const PluginOptions& options);

// The two resources, production first.
std::vector<ResourceClass> resource_classes(const PluginOptions& options);

}  // namespace gpushare::deviceplugin
