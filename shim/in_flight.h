// The in-flight bound: an opportunistic job whose gate carries `max_in_flight` keeps at
// most that many of its launches on the GPU unfinished, so that a production kernel never queues
// behind a long opportunistic backlog (DESIGN.md §3). Completion is seen through events recorded
// on the launch's stream every K launches (K = max(1, bound / 2)); a launch over the bound waits on
// the oldest event that brings the count under it.
//
// The launch path pays one relaxed load of a read-mostly word when no bound is set (production
// jobs, and every job without a daemon). Approximations, documented in docs/policies.md: kernels
// are counted complete in launch order, across streams (an event on one stream says nothing of
// another); a graph launch counts as one kernel.
#pragma once

#include <cstdint>

#include "cuda_api.h"
#include "shim_context.h"

namespace gpushare::shim {

// The bound in force for the next launch; 0: none.
inline uint32_t in_flight_bound(const protocol::ControlBlock* block) {
  return block->max_in_flight.load(std::memory_order_relaxed);
}

// The tracker is `ctx`'s (ShimContext::in_flight), made on the first call; it publishes the count
// in the control block in force in `ctx` and calls the driver's event functions through
// ctx.driver.
//
// Before a launch under a bound: waits until fewer than `bound` launches are unfinished.
void in_flight_before_launch(ShimContext& ctx, uint32_t bound, CUstream stream,
                             bool per_thread_stream);
// After it: counts it, and records an event every K launches.
void in_flight_after_launch(ShimContext& ctx, uint32_t bound, CUstream stream,
                            bool per_thread_stream, bool launched);
// In a forked child: forget the parent's events (lifecycle.cpp).
void in_flight_reset_after_fork(ShimContext& ctx);
// When a test's context goes: deletes its tracker. Never for g_shim: a launch may run during exit.
void in_flight_release(ShimContext& ctx);

}  // namespace gpushare::shim
