// The real gpushare-device-plugin as a child process of a test, pointed at a fake kubelet's
// folders under a TempDir, polling fast so the tests wait on conditions, not on sleeps.
#pragma once

#include <string>
#include <vector>

#include "harness.h"

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
  std::vector<std::string> gpus = {"GPU-aaaaaaaa-1111-2222-3333-444444444444",
                                   "GPU-bbbbbbbb-1111-2222-3333-444444444444"};
  std::vector<std::string> extra_args;

  std::string map_path() const { return state_dir + "/allocations.json"; }
  ChildProcess start() const;
};

}  // namespace gpushare::testing
