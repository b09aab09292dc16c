// The link's background thread: reconnects while the daemon is away (every kRetryPeriodMs, and at
// once after a loss, since a daemon restarted by systemd may be back already), and watches the
// registered connection while it is not. It never touches the launch path: a loss puts the
// local, open control block in force (daemon_link.cpp) and the program runs on, pass-through.
#include <poll.h>
#include <time.h>

#include <cerrno>

#include "background_thread.h"
#include "daemon_link_state.h"

namespace gpushare::shim {
namespace {

constexpr int kRetryPeriodMs = 1000;  // reconnect attempts while the daemon is away

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void* watch_daemon(void*) {
  bool retry_now = false;  // right after a loss
  for (;;) {
    int fd = g_link.fd.load();
    if (fd < 0) {
      if (!retry_now) sleep_ms(kRetryPeriodMs);
      retry_now = false;
      LinkLock lock;
      const char* why = "";
      if (g_link.fd.load() < 0 && !connect_and_register(&why)) warn_unreachable(why);
      if (g_link.fd.load() >= 0) g_link.warned_unreachable = false;
      continue;
    }
    // The daemon never sends unsolicited frames: only its going away (EOF, or our own shutdown
    // after a failed request) wakes this poll. POLLIN is not asked for, so replies don't.
    pollfd p{fd, POLLRDHUP, 0};
    int n = poll(&p, 1, kRetryPeriodMs);
    bool hung_up = n > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
    if (hung_up || !still_ours(fd)) {
      LinkLock lock;
      if (g_link.fd.load() == fd) {
        lose_daemon(!still_ours(fd)         ? "the program closed the connection's descriptor"
                    : p.revents & POLLRDHUP ? "connection closed"
                                            : "socket error");
        retry_now = true;
      }
    }
  }
  return nullptr;
}

}  // namespace

bool start_watcher() {
  return start_background_thread(watch_daemon);
}

}  // namespace gpushare::shim
