// The process's completion poller (completions.h): one background thread over g_shim's marks.
// Apart from completions.cpp so that the tests, which build contexts of their own and poll them by
// hand, link the marks without the process's context.
#include <stdlib.h>

#include <atomic>

#include "background_thread.h"
#include "completions.h"
#include "log.h"

namespace gpushare::shim {
namespace {

std::atomic<bool> g_poller_started{false};

void* poller_body(void*) {
  completions_poll_forever(g_shim);
}

void stop_at_exit() {
  completions_stop(g_shim);
}

}  // namespace

void completions_start() {
  if (g_poller_started.exchange(true)) return;
  // Registered after the CUDA runtime's own exit handler (cuInit has run), so it runs before it.
  atexit(stop_at_exit);
  if (!start_background_thread(poller_body)) {
    log_warning("completion signal off for this process: its poller thread could not start");
  }
}

void completions_reset_after_fork() {
  completions_forget_after_fork(g_shim);
  g_poller_started.store(false);
}

}  // namespace gpushare::shim
