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

namespace gpushare::shim {

inline constexpr uint64_t kNoMark = ~uint64_t{0};

// The launch number that records the next mark; kNoMark while completions are off.
extern std::atomic<uint64_t> g_next_mark;

inline bool completion_mark_due(uint64_t ticket) {
  return ticket >= g_next_mark.load(std::memory_order_relaxed);
}

// The slow path of a launch numbered `ticket` that reached the next mark: records the mark on
// `stream` when the launch succeeded (and the stream is not capturing a graph).
void completion_mark(uint64_t ticket, CUstream stream, bool per_thread_stream, bool launched);

// Starts the poller thread once per process (after registration: it follows whichever control
// block is current, and the stride the daemon writes there).
void completions_start();
// pthread_atfork child handler: the parent's poller and events do not exist in the child.
void completions_reset_after_fork();

}  // namespace gpushare::shim
