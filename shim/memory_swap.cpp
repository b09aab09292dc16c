#include "memory_swap.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "background_thread.h"
#include "daemon_link.h"
#include "driver_calls.h"
#include "gpushare/protocol/futex.h"
#include "hooks.h"
#include "log.h"
#include "stream_capture.h"

namespace gpushare::shim {

int current_device();  // shim/lifecycle.cpp

namespace {

using protocol::ControlBlock;
using protocol::Residency;

struct Swappable {
  uint64_t bytes;
  int device;
  CUcontext context;
  Residency where;  // a bounded move to the device (rotation's prefetch) leaves some on host
};

struct SwapState {
  // Held by the swap thread for a whole move, and by track/untrack: a free never runs under a
  // prefetch of the same pointer, and a new allocation lands where the rest of the memory is.
  std::mutex mutex;
  std::map<uint64_t, Swappable> live;
  // Where the tracked memory is: the device only when all of it is there; a new allocation
  // joins it there, else on host.
  Residency residency = Residency::device;
  // The driver answered CUDA_ERROR_DEINITIALIZED: it shut down, as it does while the program
  // exits. Nothing can move any more, and the memory leaves the device with the process.
  bool driver_gone = false;
};
// Leaked on purpose, like the accounting: the thread may run during exit().
SwapState& swap_state() {
  static SwapState* s = new SwapState;
  return *s;
}
std::atomic<bool> g_thread_started{false};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// What a move did: the bytes it moved, and those whose move the driver refused (they stay where
// they were; the driver migrates them on demand).
struct Moved {
  uint64_t bytes = 0, refused = 0;
};

// Under the state's mutex: moves every tracked allocation that is not at `to` yet; towards the
// device with `limit` > 0, only whole allocations while their sum stays within it (rotation's
// prefetch: the rest comes at the job's turn). Towards the host with `progress` set (a daemon's
// request), each allocation's prefetch is waited for and the bytes known to have left the device
// are published there: the daemon admits a waiting production allocation as soon as enough room
// is free (protocol/control_block.h, swap_progress_*).
Moved move_all(SwapState& s, Residency to, std::atomic<uint64_t>* progress = nullptr,
               uint64_t limit = 0) {
  const DriverCalls& d = driver_calls();
  // The largest first: each step towards the host costs one synchronisation, and production
  // waits for a share of the room, not for a count of allocations, so big steps free what it
  // needs in the fewest round trips.
  std::vector<std::pair<uint64_t, Swappable*>> order;
  order.reserve(s.live.size());
  for (auto& [ptr, a] : s.live)
    if (a.where != to) order.emplace_back(ptr, &a);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& x, const auto& y) { return x.second->bytes > y.second->bytes; });
  const bool streaming = progress && to == Residency::host && d.ctx_synchronize;
  Moved moved;
  uint64_t confirmed = 0, refusals = 0, first_refused = 0;
  CUresult refusal = CUDA_SUCCESS;
  CUcontext synced = nullptr;
  for (const auto& [ptr, a] : order) {
    // The largest first, then smaller ones into the room a larger one did not fit.
    if (limit > 0 && moved.bytes + a->bytes > limit) continue;
    if (d.ctx_set_current && a->context) d.ctx_set_current(a->context);
    // Work already queued finishes before its memory leaves (the gate holds any new launch).
    if (a->context != synced && d.ctx_synchronize) d.ctx_synchronize(), synced = a->context;
    int where = to == Residency::host ? -1 : a->device;
    CUresult r = advise_preferred(ptr, a->bytes, where);
    if (r == CUDA_SUCCESS) r = prefetch(ptr, a->bytes, where);
    if (r == CUDA_ERROR_DEINITIALIZED) {  // every later call would answer the same
      s.driver_gone = true;
      break;
    }
    // Its preference is set (or the driver refused it): where it is, the driver decides on
    // demand; asked again, it would fail again.
    a->where = to;
    if (r != CUDA_SUCCESS) {
      moved.refused += a->bytes;
      if (refusals++ == 0) refusal = r, first_refused = ptr;
      continue;
    }
    moved.bytes += a->bytes;
    // Only bytes whose prefetch completed are room the daemon may give away; a failed
    // synchronisation leaves them unconfirmed (the final acknowledgement still covers them).
    if (streaming && d.ctx_synchronize() == CUDA_SUCCESS) {
      confirmed += a->bytes;
      progress->store(confirmed, std::memory_order_release);
    }
  }
  if (d.ctx_synchronize && synced) d.ctx_synchronize();
  // One line a move, not one an allocation: a GPU without concurrent managed access refuses
  // every prefetch, and a job may hold thousands of allocations.
  if (refusals > 0)
    log_warning(
        "cannot move %llu of %zu allocations (%llu bytes, the first at 0x%llx) to the %s: CUDA "
        "error %d; they stay where they are and the driver migrates them on demand",
        static_cast<unsigned long long>(refusals), order.size(),
        static_cast<unsigned long long>(moved.refused),
        static_cast<unsigned long long>(first_refused), to == Residency::host ? "host" : "device",
        static_cast<int>(refusal));
  const bool all_there = std::all_of(s.live.begin(), s.live.end(),
                                     [to](const auto& entry) { return entry.second.where == to; });
  s.residency = all_there ? to : Residency::host;
  return moved;
}

// How long a move waits for the program's graph captures to end: the daemon's word
// (capture_patience_ms, half its swap timeout: production memory comes first), else 1 s. Captures
// take milliseconds.
std::chrono::milliseconds capture_patience(const ControlBlock* block) {
  uint32_t ms = block->capture_patience_ms.load(std::memory_order_relaxed);
  return std::chrono::milliseconds(ms ? ms : 1000);
}

// move_all between the program's captures (stream_capture.h): its context synchronisations would
// invalidate a capture in progress. Takes the state's mutex only once no capture is in progress,
// since the program may allocate (track_swappable) inside a capture.
Moved move_between_captures(SwapState& s, const ControlBlock* block, Residency to,
                            std::atomic<uint64_t>* progress = nullptr, uint64_t limit = 0,
                            Residency* now_at = nullptr) {
  const std::chrono::milliseconds patience = capture_patience(block);
  ExclusiveMove move(capture_exclusion(), patience);
  if (!move.clear())
    log_warning(
        "a CUDA graph capture of this program has been in progress for over %lld ms: "
        "moving its memory now may invalidate that capture",
        static_cast<long long>(patience.count()));
  std::lock_guard lock(s.mutex);
  Moved moved = move_all(s, to, progress, limit);
  if (now_at) *now_at = s.residency;
  return moved;
}

// The residency, read under the state's mutex.
Residency residency_now(SwapState& s) {
  std::lock_guard lock(s.mutex);
  return s.residency;
}

// Whether a move met the driver shut down (SwapState::driver_gone). The swap thread then ends
// without acknowledging the request: the memory did not move, so the daemon must not count it off
// the device; the process's exit frees it, and the daemon admits what waits for it then (or at
// its swap timeout, saying so, where the process lives on without its driver).
bool driver_gone(SwapState& s) {
  std::lock_guard lock(s.mutex);
  if (!s.driver_gone) return false;
  log_info("the CUDA driver has shut down (the program is exiting): its memory is not moved and "
           "leaves the device with the process");
  return true;
}

void wait_for_request(ControlBlock* block, uint32_t seq) {
  // The timeout also notices a replaced or lost control block.
  protocol::futex_wait(&block->memory_request_seq, seq, 100'000'000);
}

void* swap_thread(void*) {
  SwapState& s = swap_state();
  for (;;) {
    ControlBlock* block = control_block();
    if (block == local_control_block()) {
      // No daemon (any more): pass-through, so the memory belongs on the device again.
      if (residency_now(s) == Residency::host) move_between_captures(s, block, Residency::device);
      if (driver_gone(s)) return nullptr;
      timespec pause{0, 100 * 1000 * 1000};
      nanosleep(&pause, nullptr);
      continue;
    }
    uint32_t seq = block->memory_request_seq.load(std::memory_order_acquire);
    if (seq == block->memory_done_seq.load(std::memory_order_relaxed)) {
      // A new daemon (new block) believes the memory is on the device: make it so.
      Residency now_at = residency_now(s);
      if (now_at == Residency::host && seq == 0)
        move_between_captures(s, block, Residency::device, nullptr, 0, &now_at);
      if (driver_gone(s)) return nullptr;
      block->memory_residency.store(static_cast<uint32_t>(now_at), std::memory_order_relaxed);
    }
    if (seq == block->memory_done_seq.load(std::memory_order_relaxed)) {
      wait_for_request(block, seq);
      continue;
    }
    auto target = block->memory_target.load(std::memory_order_acquire) ==
                          static_cast<uint32_t>(Residency::host)
                      ? Residency::host
                      : Residency::device;
    if (target == Residency::host) {
      // Progress of this request starts at 0: the bytes first, so that the new seq is never seen
      // with the previous request's bytes.
      block->swap_progress_bytes.store(0, std::memory_order_relaxed);
      block->swap_progress_seq.store(seq, std::memory_order_release);
    }
    // Towards the device, a bound (rotation's prefetch) may leave part of it on host.
    const uint64_t limit = target == Residency::device
                               ? block->memory_target_bytes.load(std::memory_order_acquire)
                               : 0;
    const uint64_t start = now_ns();
    Residency now_at = target;
    // Not `s.residency == target ? 0 : ...`: after a bounded move the memory is partly on the
    // device while `residency` says host; move_all passes over what is in place already.
    const Moved moved =
        move_between_captures(s, block, target, &block->swap_progress_bytes, limit, &now_at);
    if (driver_gone(s)) return nullptr;
    block->swap_bytes.store(moved.bytes, std::memory_order_relaxed);
    // Towards the device a refused move leaves memory on host, which the daemon already counts
    // on the device (it errs toward production); towards the host it is room the daemon must not
    // give away.
    block->swap_unmoved_bytes.store(target == Residency::host ? moved.refused : 0,
                                    std::memory_order_relaxed);
    block->swap_ns.store(now_ns() - start, std::memory_order_relaxed);
    block->memory_residency.store(static_cast<uint32_t>(now_at), std::memory_order_relaxed);
    block->memory_done_seq.store(seq, std::memory_order_release);
  }
  return nullptr;
}

void start_thread_once() {
  if (g_thread_started.exchange(true)) return;
  static std::once_flag fork_handler;
  std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, swap_after_fork_child); });
  if (!start_background_thread(swap_thread))
    log_warning("cannot start the swap thread: this job's memory cannot be moved to host");
}

}  // namespace

bool allocates_swappable() {
  ControlBlock* block = control_block();
  return block != local_control_block() &&
         block->job_class.load(std::memory_order_relaxed) ==
             static_cast<uint32_t>(protocol::JobClass::opportunistic) &&
         block->swappable_memory.load(std::memory_order_relaxed) == 1;
}

CUresult alloc_swappable(CUdeviceptr* ptr, size_t bytes) {
  auto managed = real<Hook::cuMemAllocManaged>();
  if (!managed) return CUDA_ERROR_STUB_LIBRARY;
  CUresult r = managed(ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  // Preferred on the device: pages stay there (no thrashing) until the daemon asks otherwise.
  if (r == CUDA_SUCCESS) advise_preferred(*ptr, bytes, current_device());
  return r;
}

void track_swappable(uint64_t ptr, uint64_t bytes, int device) {
  start_thread_once();
  const DriverCalls& d = driver_calls();
  CUcontext context = nullptr;
  if (d.ctx_get_current) d.ctx_get_current(&context);
  SwapState& s = swap_state();
  std::lock_guard lock(s.mutex);
  s.live[ptr] = Swappable{bytes, device, context, s.residency};
  // Inside a capture (an allocator that allocates while the program captures, as PyTorch's does)
  // the prefetch, an operation on the legacy stream, could join the capture: the preference
  // alone keeps the new pages on host as they are first touched.
  if (s.residency == Residency::host && advise_preferred(ptr, bytes, -1) == CUDA_SUCCESS &&
      capture_exclusion().in_progress() == 0)
    prefetch(ptr, bytes, -1);
}

bool untrack_swappable(uint64_t ptr) {
  SwapState& s = swap_state();
  std::lock_guard lock(s.mutex);
  return s.live.erase(ptr) > 0;
}

void retrack_swappable(uint64_t ptr, uint64_t bytes, int device) {
  track_swappable(ptr, bytes, device);
}

int device_totals(uint64_t* totals, int max) {
  const DriverCalls& d = driver_calls();
  auto total_mem = real<Hook::cuDeviceTotalMem_v2>();
  int count = 0;
  if (!d.device_get_count || !total_mem || d.device_get_count(&count) != CUDA_SUCCESS) return 0;
  int n = 0;
  for (int i = 0; i < count && n < max; ++i) {
    size_t bytes = 0;
    if (total_mem(&bytes, i) != CUDA_SUCCESS) break;
    totals[n++] = bytes;
  }
  return n;
}

void swap_after_fork_child() {
  g_thread_started.store(false);
  // The parent's managed memory is not the child's to move; start from fresh books.
  new (&swap_state()) SwapState;
}

}  // namespace gpushare::shim
