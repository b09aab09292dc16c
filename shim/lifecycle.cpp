#include "lifecycle.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>

#include "accounting.h"
#include "completions.h"
#include "daemon_link.h"
#include "dlsym.h"
#include "families.h"
#include "in_flight.h"
#include "log.h"
#include "settings.h"
#include "stream_capture.h"

namespace gpushare::shim {
namespace {

std::atomic<bool> g_registered{false};
std::mutex* g_init_mutex = new std::mutex;

void after_fork_in_child() {
  // The child is a new process: its own counters, its own registration (on its next cuInit).
  new (g_init_mutex) std::mutex;
  g_registered.store(false);
  reset_accounting_after_fork();
  daemon_link_after_fork_child();
  in_flight_reset_after_fork(g_shim);
  completions_reset_after_fork();
  capture_exclusion().reset_after_fork();
}

__attribute__((constructor)) void on_load() {
  // Only this: no environment, no sockets, no threads under the loader lock.
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

__attribute__((destructor)) void on_unload() { write_report_if_requested(); }

}  // namespace

CUresult on_first_init() {
  if (g_registered.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::lock_guard lock(*g_init_mutex);
  if (g_registered.load(std::memory_order_relaxed)) return CUDA_SUCCESS;
  const Settings& s = settings();
  if (!daemon_link_start(s)) {
    log_warning("GPUSHARE_REQUIRE_DAEMON=1 and gpushared is not reachable at %s: cuInit fails "
                "with CUDA_ERROR_NOT_PERMITTED until it is",
                s.socket_path.c_str());
    return CUDA_ERROR_NOT_PERMITTED;
  }
  completions_start();  // follows the daemon's completion stride (production jobs)
  g_registered.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

// --- helpers the families need ---------------------------------------------------------------

int current_device() {
  using CtxGetDevice = CUresult (*)(CUdevice*);
  static std::atomic<CtxGetDevice> fn{nullptr};
  CtxGetDevice f = fn.load(std::memory_order_acquire);
  if (!f) {
    void* library = library_handle(Library::cuda, /*load=*/false);
    if (!library) return 0;
    f = reinterpret_cast<CtxGetDevice>(real_dlsym()(library, "cuCtxGetDevice"));
    if (!f) return 0;
    fn.store(f, std::memory_order_release);
  }
  CUdevice device = 0;
  return f(&device) == CUDA_SUCCESS ? device : 0;
}

void substitute_proc_address(const char* symbol, void** pfn) {
  if (void* wrapper = wrapper_for_real(*pfn)) {
    *pfn = wrapper;
    count_proc_address_substitution();
    return;
  }
  if (!symbol || is_wrapper(*pfn)) return;
  // A hooked name whose pointer we don't know: launches through it would be missed.
  std::string_view base = symbol;
  for (const HookInfo& h : kHooks) {
    std::string_view name = h.name;
    if (name.substr(0, base.size()) == base &&
        (name.size() == base.size() || name.substr(base.size()) == "_v2" ||
         name.substr(base.size()) == "_ptsz")) {
      count_proc_address_unmatched();
      return;
    }
  }
}

}  // namespace gpushare::shim
