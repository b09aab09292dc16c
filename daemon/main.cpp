// gpushared: the per-machine daemon every shim registers with (docs/daemon.md).
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "authorization.h"
#include "config.h"
#include "crash_backtrace.h"
#include "logging.h"
#include "server.h"

using namespace gpushare::daemon;

int main(int argc, char** argv) {
  CLI::App app{
      "gpushared: registry of GPU jobs, their priorities and their memory (docs/daemon.md)"};
  std::string config_path = kDefaultConfigPath;
  std::string log_level;
  bool check_only = false;
  auto* config_option =
      app.add_option("-c,--config", config_path, "configuration file")->capture_default_str();
  app.add_option("--log-level", log_level, "overrides log_level of the configuration")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_flag("--check-config", check_only, "validate the configuration, print problems, exit");
  // Tests only (hidden): a fake /proc whose <pid>/cgroup places test clients in pods. It is the
  // daemon's own argument, so only whoever starts the daemon sets it, never a client; whoever
  // starts the daemon could as well give it a config that grants everything.
  std::string proc_root = "/proc";
  app.add_option("--proc-root", proc_root, "")
      ->group("")
      ->check(CLI::ExistingDirectory);
  app.set_version_flag("--version", GPUSHARE_VERSION);
  CLI11_PARSE(app, argc, argv);

  // Absolute, so SIGHUP re-reads the same file and `status` shows where it is.
  std::error_code ignored;
  config_path = std::filesystem::absolute(config_path, ignored).lexically_normal().string();
  install_crash_backtrace();
  setup_logging(log_level.empty() ? "info" : log_level);

  ConfigResult loaded;
  if (config_option->count() == 0 && access(config_path.c_str(), F_OK) != 0) {
    // No file at the default place: run with the defaults (documented), but say so.
    spdlog::warn("{} does not exist: using the built-in defaults", config_path);
    loaded.config = Config{};
  } else {
    loaded = load_config(config_path);
  }
  if (!loaded.config) {
    // --check-config is for a person or a script: plain lines, no log timestamps.
    for (const auto& e : loaded.errors) {
      if (check_only && e.rfind(config_path + ":", 0) == 0)
        std::fprintf(stderr, "%s\n", e.c_str());
      else if (check_only)
        std::fprintf(stderr, "%s: %s\n", config_path.c_str(), e.c_str());
      else
        spdlog::critical("config {}: {}", config_path, e);
    }
    return 1;
  }
  if (check_only) {
    for (const std::string& w : config_warnings(*loaded.config))
      std::printf("%s: warning: %s\n", config_path.c_str(), w.c_str());
    std::printf("%s: ok\n", config_path.c_str());
    return 0;
  }
  for (const std::string& w : config_warnings(*loaded.config))
    spdlog::warn("config {}: {}", config_path, w);
  if (log_level.empty()) set_log_level(loaded.config->log_level);

  // One descriptor per client: take what the hard limit allows.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  Server server(std::move(*loaded.config), config_path);
  server.override_log_level(log_level);
  if (proc_root != "/proc") {
    spdlog::warn("--proc-root {}: pods are read from {}/<pid>/cgroup, not from the kernel's "
                 "/proc (for tests only)",
                 proc_root, proc_root);
    server.set_proc_root(proc_root);
  }
  return server.run();
}
