// The completion signal: what the GPU has finished of this process's launches, published for the
// daemon's policies (docs/protocol.md "Completion signal", docs/policies.md "Which signal").
//
// A launch count says what the CPU queued: a training step queues its ~700 kernels in a few ms and
// then waits for them, so launches per 200 ms period swing by whole steps (±8-15 % on the H100).
// Completions follow the GPU. When the daemon sets the control block's completion_stride K (it does
// for production jobs), the launch whose number reaches the next multiple of K records a *mark*, an
// event on its own stream, right after the real launch; a poller thread of the shim queries the
// marks in order and publishes the launch number of the latest one complete. The launch path pays
// one relaxed load of a read-mostly word and a compare; every K-th launch pays an event record.
//
// Approximations (documented): a mark covers the launches before it on its own stream only, so
// with several streams "completed" is the latest mark done in recording order; launches after the
// last mark of a burst are seen complete only when the next burst's first mark is.
#pragma once

#include <atomic>
#include <cstdint>

#include "cuda_api.h"
#include "shim_context.h"

namespace gpushare::shim {

// Whether the launch numbered `ticket` records the next mark (ctx.next_mark; kNoMark: off).
inline bool completion_mark_due(const ShimContext& ctx, uint64_t ticket) {
  return ticket >= ctx.next_mark.load(std::memory_order_relaxed);
}

// The marks are `ctx`'s (ShimContext::completions), made on first use; they follow the stride of
// the control block in force in `ctx`, publish there, and call the driver through ctx.driver.
//
// The slow path of a launch numbered `ticket` that reached the next mark: records the mark on
// `stream` when the launch succeeded (and the stream is not capturing a graph).
void completion_mark(ShimContext& ctx, uint64_t ticket, CUstream stream, bool per_thread_stream,
                     bool launched);
// One pass of the poller: follows the block's stride and poll period, retires the marks that
// completed, publishes completed_launches. Returns whether marks are still pending.
bool completions_poll(ShimContext& ctx);
// Before exit: no driver call from the marks after this (the runtime tears its contexts down).
void completions_stop(ShimContext& ctx);

// The poller's loop: polls while marks are pending (every completion_poll_us), else sleeps until
// the next mark or 10 ms. Never returns.
[[noreturn]] void completions_poll_forever(ShimContext& ctx);
// In a forked child: forget the parent's marks and events.
void completions_forget_after_fork(ShimContext& ctx);

// completions_poller.cpp, the process's (g_shim's) poller thread: started once, after
// registration (it follows whichever control block is current and the stride the daemon writes
// there), stopped before the CUDA runtime's exit handler; a fork child starts none until it
// registers.
void completions_start();
void completions_reset_after_fork();
// When a test's context goes: deletes its marks' state. Never for g_shim.
void completions_release(ShimContext& ctx);

}  // namespace gpushare::shim
