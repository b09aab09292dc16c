// gpushare-device-plugin (docs/kubernetes.md): serves both extended resources to the kubelet,
// re-registers when the kubelet restarts, and keeps the allocation map gpushared reads in step
// with the kubelet's PodResources. The main thread polls the kubelet's socket and waits for
// SIGTERM; a second thread lists PodResources.
#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "allocation_store.h"
#include "gpu_discovery.h"
#include "kubelet_watch.h"
#include "plugin_options.h"
#include "pod_resources_client.h"
#include "resource_endpoint.h"

using namespace gpushare::deviceplugin;

namespace {

// Lists PodResources every interval until stopped; logs a failure once until it recovers.
class PodResourcesRefresh {
 public:
  PodResourcesRefresh(const PluginOptions& options, AllocationStore& store)
      : options_(options), store_(store), thread_([this] { run(); }) {}
  ~PodResourcesRefresh() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::vector<std::string> resources;
    for (const auto& r : resource_classes(options_)) resources.push_back(r.resource);
    bool failing = false;
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      std::string error;
      auto pods = list_pod_resources(options_.pod_resources_socket, resources, &error);
      if (!pods && !failing)
        spdlog::warn("cannot list PodResources at {}: {} (retrying every {} ms)",
                     options_.pod_resources_socket, error, options_.pod_resources_interval_ms);
      if (pods && failing)
        spdlog::info("PodResources at {} answers", options_.pod_resources_socket);
      failing = !pods;
      store_.update(pods);
      lock.lock();
      wake_.wait_for(lock, std::chrono::milliseconds(options_.pod_resources_interval_ms),
                     [this] { return stopping_; });
    }
  }

  const PluginOptions& options_;
  AllocationStore& store_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  ParsedOptions parsed = parse_plugin_options(argc, argv);
  if (parsed.exit_now) return parsed.exit_code;
  if (!parsed.options) {
    for (const auto& e : parsed.errors)
      std::fprintf(stderr, "gpushare-device-plugin: %s\n", e.c_str());
    return 2;
  }
  PluginOptions options = *parsed.options;
  // One line per event on stderr, written at once (the container's log, or a test's file).
  auto logger = std::make_shared<spdlog::logger>("gpushare-device-plugin",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e gpushare-device-plugin %l: %v");
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(options.log_level));

  std::vector<std::string> gpus = options.gpus;
  if (gpus.empty()) {
    std::vector<std::string> problems;
    gpus = discover_gpus(options.gpu_info_dir, &problems);
    for (const auto& p : problems) spdlog::warn("GPU discovery: {}", p);
    if (gpus.empty()) {
      spdlog::error("no GPU found in {} (is the NVIDIA driver loaded?); give --gpus to name them",
                    options.gpu_info_dir);
      return 1;
    }
  }

  // SIGTERM and SIGINT end the watch loop; blocked before any thread starts so none takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  AllocationStore store(options.state_dir, options.token_grace_s);
  std::string error;
  if (!store.open(&error)) {
    spdlog::error("state folder {}: {}", options.state_dir, error);
    return 1;
  }
  std::vector<std::unique_ptr<ResourceEndpoint>> endpoints;
  for (const auto& r : resource_classes(options)) {
    endpoints.push_back(std::make_unique<ResourceEndpoint>(r, options, gpus, store));
    spdlog::info("{}: {} shares on each of {} GPUs", r.resource, r.shares_per_gpu, gpus.size());
  }
  PodResourcesRefresh refresh(options, store);

  std::string kubelet_socket = options.device_plugin_dir + "/kubelet.sock";
  SocketIdentity registered_with;
  bool waiting_logged = false;
  std::string last_failure;  // a failure repeated at every check is logged once
  while (true) {
    SocketIdentity kubelet = socket_identity(kubelet_socket);
    bool own_present = true;
    for (const auto& e : endpoints)
      own_present = own_present && socket_identity(e->socket_path()).exists;
    switch (watch_action(kubelet, registered_with, own_present)) {
      case WatchAction::none:
        break;
      case WatchAction::wait:
        if (!waiting_logged) spdlog::info("waiting for the kubelet at {}", kubelet_socket);
        waiting_logged = true;
        registered_with = {};
        break;
      case WatchAction::serve_and_register: {
        waiting_logged = false;
        bool all = true;
        for (const auto& e : endpoints) {
          std::string why;
          if (!e->serve(&why) || !e->register_with_kubelet(&why)) {
            std::string failure = e->resource().resource + ": " + why;
            if (failure != last_failure)
              spdlog::warn("{}: cannot register with the kubelet at {}: {} (retrying)",
                           e->resource().resource, kubelet_socket, why);
            last_failure = failure;
            all = false;
            break;
          }
          spdlog::info("{}: registered with the kubelet at {} as {}", e->resource().resource,
                       kubelet_socket, e->socket_path());
        }
        registered_with = all ? kubelet : SocketIdentity{};
        if (all) last_failure.clear();
        break;
      }
    }
    timespec wait{options.watch_interval_ms / 1000, (options.watch_interval_ms % 1000) * 1000000L};
    int signo = sigtimedwait(&signals, nullptr, &wait);
    if (signo == SIGTERM || signo == SIGINT) {
      spdlog::info("signal {}: stopping", signo);
      break;
    }
  }
  for (auto& e : endpoints) e->stop();
  return 0;
}
