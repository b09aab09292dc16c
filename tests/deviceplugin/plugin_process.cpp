#include "plugin_process.h"

namespace gpushare::testing {

const char* plugin_path() {
  return PLUGIN_PATH;
}

ChildProcess PluginSetup::start() const {
  std::string gpu_list;
  for (const auto& g : gpus) gpu_list += (gpu_list.empty() ? "" : ",") + g;
  std::vector<std::string> argv = {plugin_path(),
                                   "--device-plugin-dir",
                                   device_plugin_dir,
                                   "--pod-resources-socket",
                                   pod_resources_socket,
                                   "--state-dir",
                                   state_dir,
                                   "--gpus",
                                   gpu_list,
                                   "--production-shares",
                                   "2",
                                   "--opportunistic-shares",
                                   "3",
                                   "--library",
                                   Artefacts::shim(),
                                   "--socket-dir",
                                   socket_dir,
                                   "--watch-interval-ms",
                                   "20",
                                   "--pod-resources-interval-ms",
                                   "20"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return ChildProcess::start(argv, {{"PATH", "/usr/bin:/bin"}}, log);
}

}  // namespace gpushare::testing
