// The link's life: started on the first cuInit, lost when the daemon goes, dropped in a forked
// child. The conversations themselves are registration.cpp's and memory_declarations.cpp's; the
// thread that reconnects is daemon_watcher.cpp's (daemon_link_state.h lists the files).
#include "daemon_link.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "daemon_link_state.h"
#include "daemon_socket.h"
#include "driver_calls.h"
#include "gate.h"
#include "log.h"
#include "settings.h"
#include "visible_devices.h"

namespace gpushare::shim {

constinit DaemonLink g_link;

bool still_ours(int fd) {
  return fd >= 0 && socket_inode(fd) == g_link.socket_inode.load();
}

void say(const char* format, ...) {
  if (g_link.settings.quiet) return;
  char line[512];
  int n = std::snprintf(line, sizeof line, "gpushare[%d]: ", static_cast<int>(getpid()));
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  if (n < 0 || m < 0) return;
  size_t len = std::min(static_cast<size_t>(n + m), sizeof line - 2);
  line[len++] = '\n';
  ssize_t written = ::write(STDERR_FILENO, line, len);
  (void)written;
}

void warn_unreachable(const char* why) {
  if (g_link.warned_unreachable) return;
  log_warning(
      "gpushared is not reachable at %s (%s): running pass-through, retrying in the background",
      g_link.settings.socket_path, why);
  g_link.warned_unreachable = true;
}

void lose_daemon(const char* why) {
  fall_back_to_local();
  int fd = g_link.fd.exchange(-1);
  if (still_ours(fd)) ::close(fd);  // else the host closed it already and may reuse the number
  g_link.warned_unreachable = true;  // this warning covers the retries that follow
  log_warning("lost gpushared (%s): running pass-through, reconnecting in the background", why);
}

void break_link(int fd) {
  fall_back_to_local();
  if (still_ours(fd))
    shutdown(fd, SHUT_RDWR);
  else
    g_link.fd.store(-1);  // not ours any more: forget it, never touch it
}

bool daemon_link_start(const Settings& settings) {
  LinkLock lock;
  if (g_link.started.load()) return true;
  LinkSettings& s = g_link.settings;
  protocol::copy_text(s.socket_path, settings.socket_path.c_str());
  protocol::copy_text(s.job_name, settings.job_name.c_str());
  s.production = settings.production;
  s.quiet = settings.quiet;
  // Once per process, after the real cuInit: the driver has read CUDA_VISIBLE_DEVICES by now.
  s.numeric_devices = numeric_visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"));
  set_device_table(s.numeric_devices);
  s.uuids = device_uuids();

  const char* why = "";
  bool connected = connect_and_register(&why);
  if (!connected && settings.require_daemon) return false;  // cuInit fails; retried next cuInit
  if (!connected) warn_unreachable(why);
  if (!g_link.thread_running.load()) {
    if (start_watcher())
      g_link.thread_running.store(true);
    else
      log_warning("cannot start the daemon-link thread: no reconnection after a daemon loss");
  }
  g_link.started.store(true);
  return true;
}

int daemon_link_physical_device(int ordinal) { return physical_device(ordinal); }

void daemon_link_after_fork_child() {
  // Only this thread exists in the child; the mutex may have been held by another parent thread.
  g_link.mutex = PTHREAD_MUTEX_INITIALIZER;
  set_control_block(local_control_block());  // the parent's block counts the parent's launches
  int fd = g_link.fd.exchange(-1);
  if (still_ours(fd))
    ::close(fd);  // the parent's registration: closing our copy tells the daemon nothing
  g_link.thread_running.store(false);
  g_link.started.store(false);
  g_link.warned_unreachable = false;
}

}  // namespace gpushare::shim
