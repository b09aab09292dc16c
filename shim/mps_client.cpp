// Before the program's first real cuInit: ask gpushared whether this process is an MPS client,
// and put the answer in the environment, where the driver reads it (docs/mps.md). The decision
// itself is mps_environment.cpp; this file is the once-per-process plumbing around it.
//
// setenv is not safe against a concurrent getenv in another thread. It runs once, inside the
// program's first cuInit, and only when the daemon's operator turned MPS on: a program that
// reads its environment from other threads while it initialises CUDA is the rare case this
// accepts.
#include <pthread.h>

#include <atomic>
#include <cstdlib>

#include "daemon_link.h"
#include "log.h"
#include "mps_environment.h"
#include "settings.h"

namespace gpushare::shim {
namespace {

std::atomic<bool> g_asked{false};
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;

// A fork while another thread asks would leave the child's copy of the mutex held forever.
void after_fork_in_child() {
  g_mutex = PTHREAD_MUTEX_INITIALIZER;
}

// Only this, as in lifecycle.cpp: nothing else may run under the loader lock.
__attribute__((constructor)) void on_load() {
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

}  // namespace

void daemon_link_before_init() {
  if (g_asked.load(std::memory_order_acquire)) return;
  // Every cuInit of every thread waits here until the variables are in place.
  pthread_mutex_lock(&g_mutex);
  if (!g_asked.load(std::memory_order_relaxed)) {
    const Settings& s = settings();
    protocol::MpsReply reply{};
    const char* why = "";
    std::optional<MpsGrant> grant;
    (void)why;  // no daemon: said once by the registration after cuInit
    if (daemon_link_query_mps(s, &reply, &why)) {
      if (reply.status == static_cast<uint32_t>(protocol::MpsStatus::use_mps) &&
          reply.pipe_directory[0] == '/' && reply.client_priority <= 1 &&
          reply.active_thread_percentage <= 100)
        grant =
            MpsGrant{reply.client_priority, reply.active_thread_percentage, reply.pipe_directory};
      else if (reply.message[0])
        log_info("not an MPS client: %s", reply.message);
    }
    // No daemon: nothing MPS-related is set; registration after cuInit says it is unreachable.
    MpsEnvironment env = decide_mps_environment(
        grant, [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
    for (const std::string& warning : env.warnings) log_warning("%s", warning.c_str());
    for (const auto& [name, value] : env.set) setenv(name.c_str(), value.c_str(), 1);
    if (grant)
      log_info("MPS client of %s, priority %s%s%s", std::getenv("CUDA_MPS_PIPE_DIRECTORY"),
               std::getenv("CUDA_MPS_CLIENT_PRIORITY"),
               std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") ? ", active threads " : "",
               std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
                   ? std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
                   : "");
    g_asked.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_mutex);
}

}  // namespace gpushare::shim
