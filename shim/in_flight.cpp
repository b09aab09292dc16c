#include "in_flight.h"

#include <deque>
#include <mutex>
#include <vector>

#include "driver_calls.h"
#include "log.h"
#include "stream_capture.h"

namespace gpushare::shim {
namespace {

// Launches recorded per event: half the bound, so that one completed event always brings the
// count well under it.
uint64_t record_every(uint32_t bound) {
  return bound / 2 > 0 ? bound / 2 : 1;
}

}  // namespace

class InFlightTracker {
 public:
  explicit InFlightTracker(ShimContext& ctx) : ctx_(ctx) {}

  void before_launch(uint32_t bound, CUstream stream, bool per_thread) {
    std::lock_guard lock(mutex_);
    if (off_) return;
    RelaxedCapture relaxed(ctx_.driver());
    if (capturing(ctx_.driver(), stream, per_thread)) return;
    reap();
    while (!off_ && issued_ - completed_ >= bound && !pending_.empty()) wait_for_oldest();
    // Every recorded launch finished, but the ones after the last event may not have: record
    // one now and wait for it.
    if (!off_ && issued_ - completed_ >= bound) {
      record(stream, per_thread);
      if (!off_) wait_for_oldest();
    }
    publish();
  }

  void after_launch(uint32_t bound, CUstream stream, bool per_thread, bool launched) {
    std::lock_guard lock(mutex_);
    if (off_ || !launched) return;
    RelaxedCapture relaxed(ctx_.driver());
    if (capturing(ctx_.driver(), stream, per_thread)) return;
    ++issued_;
    if (issued_ - last_recorded_ >= record_every(bound)) record(stream, per_thread);
    publish();
  }

  void reset_after_fork() {
    // The parent's events and context mean nothing in the child.
    new (&mutex_) std::mutex;
    pending_.clear();
    spare_.clear();
    context_ = nullptr;
    issued_ = completed_ = last_recorded_ = 0;
  }

 private:
  struct Pending {
    uint64_t launch;  // the launch count when the event was recorded
    CUevent event;
  };

  void record(CUstream stream, bool per_thread) {
    const DriverCalls& d = ctx_.driver();
    auto record_fn = per_thread && d.event_record_ptsz ? d.event_record_ptsz : d.event_record;
    if (!d.ctx_get_current || !d.event_create || !record_fn || !d.event_query ||
        !d.event_synchronize)
      return give_up("the driver lacks an event function", CUDA_ERROR_NOT_FOUND);
    CUcontext context = nullptr;
    if (CUresult r = d.ctx_get_current(&context); r != CUDA_SUCCESS)
      return give_up("cuCtxGetCurrent", r);
    if (context != context_) {
      // Events belong to a context: finish with the old ones before using this one.
      while (!off_ && !pending_.empty()) wait_for_oldest();
      for (CUevent e : spare_)
        if (d.event_destroy) d.event_destroy(e);
      spare_.clear();
      context_ = context;
    }
    CUevent event = nullptr;
    if (!spare_.empty()) {
      event = spare_.back();
      spare_.pop_back();
    } else if (CUresult r = d.event_create(&event, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
      return give_up("cuEventCreate", r);
    }
    if (CUresult r = record_fn(event, stream); r != CUDA_SUCCESS) {
      spare_.push_back(event);
      return give_up("cuEventRecord", r);
    }
    pending_.push_back({issued_, event});
    last_recorded_ = issued_;
  }

  // Drops the events that completed, oldest first.
  void reap() {
    while (!pending_.empty()) {
      CUresult r = ctx_.driver().event_query(pending_.front().event);
      if (r == CUDA_ERROR_NOT_READY) return;
      if (r != CUDA_SUCCESS) return give_up("cuEventQuery", r);
      retire_oldest();
    }
  }

  void wait_for_oldest() {
    if (CUresult r = ctx_.driver().event_synchronize(pending_.front().event); r != CUDA_SUCCESS)
      return give_up("cuEventSynchronize", r);
    retire_oldest();
  }

  void retire_oldest() {
    completed_ = pending_.front().launch;
    spare_.push_back(pending_.front().event);
    pending_.pop_front();
  }

  // Not after give_up(): the daemon would take a count frozen at that moment for a live one.
  void publish() {
    if (off_) return;
    protocol::ControlBlock* block = control_block(ctx_);
    block->in_flight.store(static_cast<uint32_t>(issued_ - completed_), std::memory_order_relaxed);
    block->in_flight_tracked.store(1, std::memory_order_relaxed);
  }

  // An event call failed: the bound is off for this process (its launches go through as before),
  // said once. Never an error for the program.
  void give_up(const char* what, CUresult r) {
    off_ = true;
    pending_.clear();
    control_block(ctx_)->in_flight_tracked.store(0, std::memory_order_relaxed);
    log_warning("in-flight bound off for this process: %s failed (CUDA error %d)", what,
                static_cast<int>(r));
  }

  ShimContext& ctx_;
  std::mutex mutex_;
  std::deque<Pending> pending_;
  std::vector<CUevent> spare_;
  CUcontext context_ = nullptr;
  uint64_t issued_ = 0, completed_ = 0, last_recorded_ = 0;
  bool off_ = false;
};

namespace {

// Made on first use without a function-local static, whose initialisation guard a fork child could
// find held by a thread of the parent.
InFlightTracker& tracker(ShimContext& ctx) {
  InFlightTracker* t = ctx.in_flight.load(std::memory_order_acquire);
  if (t) return *t;
  auto* made = new InFlightTracker(ctx);
  if (ctx.in_flight.compare_exchange_strong(t, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread won
  return *t;
}

}  // namespace

void in_flight_before_launch(ShimContext& ctx, uint32_t bound, CUstream stream,
                             bool per_thread_stream) {
  tracker(ctx).before_launch(bound, stream, per_thread_stream);
}

void in_flight_after_launch(ShimContext& ctx, uint32_t bound, CUstream stream,
                            bool per_thread_stream, bool launched) {
  tracker(ctx).after_launch(bound, stream, per_thread_stream, launched);
}

void in_flight_reset_after_fork(ShimContext& ctx) {
  // A process that never ran under a bound has nothing to forget.
  if (InFlightTracker* t = ctx.in_flight.load(std::memory_order_acquire)) t->reset_after_fork();
}

void in_flight_release(ShimContext& ctx) {
  delete ctx.in_flight.exchange(nullptr);
}

}  // namespace gpushare::shim
