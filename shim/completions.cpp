#include "completions.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

#include "driver_calls.h"
#include "gpushare/protocol/futex.h"
#include "log.h"
#include "stream_capture.h"

namespace gpushare::shim {

namespace {

// More marks than this waiting means the poller cannot keep up (or the GPU is stuck): record no
// more until it catches up, so the events held stay bounded.
constexpr size_t kMostPendingMarks = 4096;
constexpr uint32_t kLargestStride = 1u << 20;
// Poll period: with marks pending, often enough that a 200 ms control period sees ~200 updates;
// without, the poller only follows the daemon's stride.
constexpr long kPollBusyNs = 1'000'000;
constexpr long kPollIdleNs = 10'000'000;
// The range of a poll period the daemon may ask for (completion_poll_us); outside it, the default.
constexpr uint32_t kFastestPollUs = 100;
constexpr uint32_t kSlowestPollUs = 10'000;

// A stride the daemon wrote that the shim follows: a power of two up to kLargestStride; anything
// else (a scribbled block) is off.
uint32_t valid_stride(uint32_t stride) {
  return stride != 0 && stride <= kLargestStride && (stride & (stride - 1)) == 0 ? stride : 0;
}

void sleep_ns(long ns) {
  timespec t{0, ns};
  nanosleep(&t, nullptr);
}

}  // namespace

class CompletionTracker {
 public:
  explicit CompletionTracker(ShimContext& ctx) : ctx_(ctx) {}

  void mark(uint64_t ticket, CUstream stream, bool per_thread, bool launched) {
    // One thread per mark: the one that moves ctx_.next_mark on records it.
    uint64_t due = ctx_.next_mark.load(std::memory_order_relaxed);
    const uint64_t stride = stride_.load(std::memory_order_relaxed);
    if (ticket < due || stride == 0) return;
    if (!ctx_.next_mark.compare_exchange_strong(due, ticket + stride, std::memory_order_relaxed))
      return;
    if (!launched) return;
    std::lock_guard lock(mutex_);
    if (off_ || pending_.size() >= kMostPendingMarks) return;
    const DriverCalls& d = ctx_.driver();
    RelaxedCapture relaxed(d);
    if (capturing(d, stream, per_thread)) return;
    auto record_fn = per_thread && d.event_record_ptsz ? d.event_record_ptsz : d.event_record;
    if (!d.ctx_get_current || !d.ctx_set_current || !d.event_create || !record_fn ||
        !d.event_query)
      return give_up("the driver lacks an event function", CUDA_ERROR_NOT_FOUND);
    CUcontext context = nullptr;
    if (CUresult r = d.ctx_get_current(&context); r != CUDA_SUCCESS || !context) return;
    CUevent event = take_spare(context);
    if (!event) {
      if (CUresult r = d.event_create(&event, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS)
        return give_up("cuEventCreate", r);
    }
    if (CUresult r = record_fn(event, stream); r != CUDA_SUCCESS) {
      spare_.push_back({0, event, context});
      return give_up("cuEventRecord", r);
    }
    pending_.push_back({ticket, event, context});
    // Published now, not at the next poll: the daemon's idle relay must see marked work as
    // pending from the moment it is on the GPU (completed_launches < last_mark_launch).
    if (block_ && block_ == control_block(ctx_))
      block_->last_mark_launch.store(ticket, std::memory_order_release);
    // Only where the daemon's idle relay watches this job's marks (it asked for fast polls) is a
    // sleeping poller woken: there a mark seen 10 ms late holds idle-gated jobs for nothing. Waking
    // it at every mark elsewhere cost 95 ns per launch on the null driver (a futex wake and the
    // poller's lock against this one every 32 launches), where the budget is 30.
    if (busy_poll_ns_.load(std::memory_order_relaxed) >= kPollBusyNs) return;
    // Sequentially consistent with the poller's idle_ store and its re-read of the word: either
    // it sees the new word and does not sleep, or this sees it idle and wakes it.
    wake_word_.fetch_add(1);
    if (idle_.load()) protocol::futex_wake_one_private(&wake_word_);
  }

  // The poller's loop (never returns).
  [[noreturn]] void poll_forever() {
    for (;;) {
      const uint32_t seq = wake_word_.load();
      if (poll_once()) {
        sleep_ns(busy_poll_ns_.load(std::memory_order_relaxed));
        continue;
      }
      // Nothing pending: sleep until the next mark (mark() wakes the poller, so a mark is seen
      // within a busy poll period, not an idle one) or the idle period, to follow the stride.
      idle_.store(true);
      if (wake_word_.load() == seq) {
        protocol::futex_wait_private(&wake_word_, seq, kPollIdleNs);
      }
      idle_.store(false);
    }
  }

  void at_exit() {
    // The CUDA runtime tears its contexts down in its own exit handler; the poller must not be
    // inside a driver call then, nor start one after.
    std::lock_guard lock(mutex_);
    off_ = true;
  }

  void reset_after_fork() {
    new (&mutex_) std::mutex;
    pending_.clear();
    spare_.clear();
    block_ = nullptr;
    completed_ = 0;
    poller_context_ = nullptr;
    idle_.store(false);
    busy_poll_ns_.store(kPollBusyNs, std::memory_order_relaxed);
    stride_.store(0, std::memory_order_relaxed);
    ctx_.next_mark.store(kNoMark, std::memory_order_relaxed);
  }

  // Follows the current block's stride and publishes what completed. Returns whether marks are
  // pending (poll again soon).
  bool poll_once() {
    protocol::ControlBlock* block = control_block(ctx_);
    std::lock_guard lock(mutex_);
    if (off_) return false;
    if (block != block_) {
      // A new registration: its launch numbers start again from 0. The old block's marks mean
      // nothing there; their events are reused once complete.
      for (const Mark& m : pending_) retired_.push_back(m);
      pending_.clear();
      completed_ = 0;
      block_ = block;
      block->last_mark_launch.store(0, std::memory_order_relaxed);
      stride_.store(0, std::memory_order_relaxed);
      ctx_.next_mark.store(kNoMark, std::memory_order_relaxed);
    }
    const uint32_t stride = valid_stride(block->completion_stride.load(std::memory_order_relaxed));
    if (stride != stride_.load(std::memory_order_relaxed)) {
      stride_.store(stride, std::memory_order_relaxed);
      ctx_.next_mark.store(
          stride ? block->launches.load(std::memory_order_relaxed) + stride : kNoMark,
          std::memory_order_relaxed);
    }
    const uint32_t poll_us = block->completion_poll_us.load(std::memory_order_relaxed);
    busy_poll_ns_.store(poll_us >= kFastestPollUs && poll_us <= kSlowestPollUs
                            ? static_cast<long>(poll_us) * 1000
                            : kPollBusyNs,
                        std::memory_order_relaxed);
    reap();
    if (stride == 0 && pending_.empty()) {
      block->completion_tracked.store(0, std::memory_order_relaxed);
      return false;
    }
    block->completed_launches.store(completed_, std::memory_order_relaxed);
    block->marks_pending.store(static_cast<uint32_t>(pending_.size()), std::memory_order_relaxed);
    block->completion_tracked.store(off_ ? 0 : 1, std::memory_order_relaxed);
    return !pending_.empty();
  }

 private:
  struct Mark {
    uint64_t launch;  // the launch number the mark follows
    CUevent event;
    CUcontext context;
  };

  // Retires the marks that completed, oldest first. In relaxed capture mode: the program may be
  // capturing a graph on another thread in global mode, which a query from this thread would
  // otherwise invalidate (stream_capture.h).
  void reap() {
    const DriverCalls& d = ctx_.driver();
    RelaxedCapture relaxed(d);
    while (!off_ && !retired_.empty()) {  // marks of an old block: only their events matter
      if (!use_context(retired_.front().context)) return;
      CUresult r = d.event_query(retired_.front().event);
      if (r == CUDA_ERROR_NOT_READY) break;
      if (r == CUDA_SUCCESS) spare_.push_back(retired_.front());
      retired_.pop_front();
    }
    while (!off_ && !pending_.empty()) {
      const Mark& oldest = pending_.front();
      if (!use_context(oldest.context)) return;
      CUresult r = d.event_query(oldest.event);
      if (r == CUDA_ERROR_NOT_READY) return;
      if (r != CUDA_SUCCESS) return give_up("cuEventQuery", r);
      completed_ = std::max(completed_, oldest.launch);
      spare_.push_back(oldest);
      pending_.pop_front();
    }
  }

  // Events belong to a context: the poller makes the mark's context current before querying.
  bool use_context(CUcontext context) {
    if (context == poller_context_) return true;
    if (CUresult r = ctx_.driver().ctx_set_current(context); r != CUDA_SUCCESS) {
      give_up("cuCtxSetCurrent", r);
      return false;
    }
    poller_context_ = context;
    return true;
  }

  CUevent take_spare(CUcontext context) {
    for (size_t i = spare_.size(); i-- > 0;) {
      if (spare_[i].context != context) continue;
      CUevent e = spare_[i].event;
      spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
      return e;
    }
    return nullptr;
  }

  // A driver call failed: completions are off for this process (its launches go through as
  // before, the daemon falls back to launch counts), said once. Never an error for the program.
  void give_up(const char* what, CUresult r) {
    off_ = true;
    pending_.clear();
    ctx_.next_mark.store(kNoMark, std::memory_order_relaxed);
    if (block_) block_->completion_tracked.store(0, std::memory_order_relaxed);
    log_warning("completion signal off for this process: %s failed (CUDA error %d)", what,
                static_cast<int>(r));
  }

  ShimContext& ctx_;
  std::mutex mutex_;
  std::deque<Mark> pending_;   // in recording order
  std::deque<Mark> retired_;   // marks of a replaced block, still to complete
  std::vector<Mark> spare_;    // completed events, reused per context
  protocol::ControlBlock* block_ = nullptr;
  uint64_t completed_ = 0;
  CUcontext poller_context_ = nullptr;  // current on the poller thread
  std::atomic<uint64_t> stride_{0};
  std::atomic<long> busy_poll_ns_{kPollBusyNs};
  std::atomic<uint32_t> wake_word_{0};  // futex word: bumped by every mark
  std::atomic<bool> idle_{false};       // the poller sleeps on wake_word_
  bool off_ = false;
};

namespace {

// Made on first use without a function-local static, whose initialisation guard a fork child could
// find held by a thread of the parent. Never destroyed for g_shim: a launch may run during exit.
CompletionTracker& tracker(ShimContext& ctx) {
  CompletionTracker* t = ctx.completions.load(std::memory_order_acquire);
  if (t) return *t;
  auto* made = new CompletionTracker(ctx);
  if (ctx.completions.compare_exchange_strong(t, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread won
  return *t;
}

}  // namespace

void completion_mark(ShimContext& ctx, uint64_t ticket, CUstream stream, bool per_thread_stream,
                     bool launched) {
  tracker(ctx).mark(ticket, stream, per_thread_stream, launched);
}

bool completions_poll(ShimContext& ctx) {
  return tracker(ctx).poll_once();
}

void completions_stop(ShimContext& ctx) {
  tracker(ctx).at_exit();
}

void completions_poll_forever(ShimContext& ctx) {
  tracker(ctx).poll_forever();
}

void completions_forget_after_fork(ShimContext& ctx) {
  // A process that never recorded a mark has nothing to forget.
  if (CompletionTracker* t = ctx.completions.load(std::memory_order_acquire)) t->reset_after_fork();
  ctx.next_mark.store(kNoMark, std::memory_order_relaxed);
}

void completions_release(ShimContext& ctx) {
  delete ctx.completions.exchange(nullptr);
}

}  // namespace gpushare::shim
