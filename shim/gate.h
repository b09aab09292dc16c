// The launch gate: the only thing the launch path does besides counting. Every function takes the
// context whose control block is in force (shim_context.h): g_shim in the hooks, a test's own in
// tests/shim/gate_test.cpp.
#pragma once

#include <cstdint>

#include "shim_context.h"

namespace gpushare::shim {

// The stream a launch goes to, for the gate's slow path; `known` false for a launch without one
// (the multi-device cooperative launch).
struct LaunchStream {
  CUstream stream = nullptr;
  bool per_thread = false;  // a _ptsz entry point: the null stream is the per-thread one
  bool known = false;
  LaunchStream() = default;
  LaunchStream(CUstream s, bool pt) : stream(s), per_thread(pt), known(true) {}
};

// Slow path: sleeps on the control block's futex until launch number `ticket` is allowed, or until
// `block` is no longer the one in force in `ctx` (the daemon went: never keep the program
// waiting). No other timeout: a closed gate holds the launch as long as the daemon keeps it
// closed. A launch into a capturing stream is never held: it runs nothing (the graph's launch is
// gated), and holding it would hold the program's capture, which a paused job's memory move
// waits for (stream_capture.h).
void gate_wait(const ShimContext& ctx, protocol::ControlBlock* block, uint64_t ticket,
               LaunchStream stream = {});

// What passing the gate gave a launch: the block it counted into (for the rest of the launch path)
// and its launch number there.
struct GatePass {
  protocol::ControlBlock* block;
  uint64_t ticket;
};

// Counts `kernels` launches into the control block and waits when the daemon's gate is closed.
// Two relaxed loads of one cache line and one atomic add when the gate is open. With g_shim, the
// block pointer is read from a fixed address, as from the plain global it was before the context.
inline GatePass pass_gate(ShimContext& ctx, uint64_t kernels, LaunchStream stream = {}) {
  protocol::ControlBlock* block = control_block(ctx);
  uint64_t ticket = block->launches.fetch_add(kernels, std::memory_order_relaxed) + kernels;
  if (ticket > block->allowance.load(std::memory_order_relaxed) ||
      block->paused.load(std::memory_order_relaxed)) [[unlikely]]
    gate_wait(ctx, block, ticket, stream);
  return {block, ticket};
}

// Puts `block` in force (nullptr: the local block), and wakes the launches sleeping at the local
// gate so they re-read which block is in force.
void set_control_block(ShimContext& ctx, protocol::ControlBlock* block);

// Back to pass-through when the daemon is gone: the local (open) block goes in force FIRST, so a
// dead daemon can never leave the program paused; then the old block's gate opens and its
// sleepers wake. The old block is never unmapped: a launch may still hold it.
void fall_back_to_local(ShimContext& ctx);

// The same for the process's context (the daemon link).
inline void set_control_block(protocol::ControlBlock* block) {
  set_control_block(g_shim, block);
}
inline void fall_back_to_local() {
  fall_back_to_local(g_shim);
}

}  // namespace gpushare::shim
