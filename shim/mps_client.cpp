// Before the program's first real cuInit: ask gpushared whether this process is an MPS client,
// and put the answer in the environment, where the driver reads it (docs/mps.md). The decision
// itself is mps_environment.cpp; this file is the once-per-process plumbing around it.
//
// setenv is not safe against a concurrent getenv in another thread. It runs once, inside the
// program's first cuInit, and only when the daemon's operator turned MPS on: a program that
// reads its environment from other threads while it initialises CUDA is the rare case this
// accepts.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "daemon_link.h"
#include "daemon_socket.h"
#include "log.h"
#include "mps_environment.h"
#include "settings.h"

namespace gpushare::shim {
namespace {

// The question holds up the program's first cuInit: a daemon that does not answer within this
// costs the program this much once, then it runs without MPS.
constexpr int kMpsQueryTimeoutMs = 1000;

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

// One mps_query round trip on a connection of its own, closed at once: registration comes later,
// after the real cuInit. False, with *why, when the daemon is absent or gave no valid answer.
bool query_mps(const Settings& settings, protocol::MpsReply* reply, const char** why) {
  int fd = connect_daemon(settings.socket_path.c_str(), kMpsQueryTimeoutMs, why);
  if (fd < 0) return false;
  protocol::MpsQuery query{};
  query.requested_class = static_cast<uint32_t>(
      settings.production ? protocol::JobClass::production : protocol::JobClass::opportunistic);
  protocol::copy_text(query.job_name, settings.job_name.c_str());
  static char error[protocol::kMessageSize + 64];
  char text[protocol::kMessageSize] = "";
  bool ok = send_message(fd, protocol::MessageType::mps_query, &query, sizeof query) &&
            receive_reply(fd, protocol::MessageType::mps_reply, reply, sizeof *reply, nullptr, text,
                          sizeof text);
  ::close(fd);
  if (!ok) {
    // An older daemon drops a connection that sends a type it does not know: no MPS, as without
    // one.
    std::snprintf(error, sizeof error, "no valid mps_reply%s%s", *text ? ": " : "", text);
    *why = error;
    return false;
  }
  reply->pipe_directory[sizeof reply->pipe_directory - 1] = '\0';
  reply->message[sizeof reply->message - 1] = '\0';
  return true;
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
    if (query_mps(s, &reply, &why)) {
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
