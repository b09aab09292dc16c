// The real gpushare-device-plugin as a child process of a test, pointed at a fake kubelet's
// folders under a TempDir, polling fast so the tests wait on conditions, not on sleeps.
#pragma once

#include <string>
#include <vector>

#include "harness.h"
#include "simulated_uuid.h"

namespace gpushare::testing {

const char* plugin_path();  // set by tests/deviceplugin/CMakeLists.txt

struct PluginSetup {
  explicit PluginSetup(const TempDir& dir)
      : device_plugin_dir(dir / "device-plugins"),
        pod_resources_socket(dir / "pod-resources.sock"),
        state_dir(dir / "state"),
        socket_dir(dir.path),
        log(dir / "plugin.log") {}
  std::string device_plugin_dir;
  std::string pod_resources_socket;
  std::string state_dir;
  std::string socket_dir;  // where gpushared.sock is (the harness's Daemon: <dir>/gpushared.sock)
  std::string log;
  // The node's GPUs: the fake driver's first two devices, so a container given one of them in
  // CUDA_VISIBLE_DEVICES (by UUID, as the plugin writes it) finds it.
  std::vector<std::string> gpus = {fake::device_uuid_text(0), fake::device_uuid_text(1)};
  std::vector<std::string> extra_args;

  std::string map_path() const { return state_dir + "/allocations.json"; }
  ChildProcess start() const;
};

}  // namespace gpushare::testing
