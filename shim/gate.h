// The launch gate: the only thing the launch path does besides counting.
#pragma once

#include <cstdint>

#include "daemon_link.h"

namespace gpushare::shim {

// Slow path: sleeps on the control block's futex until launch number `ticket` is allowed.
void gate_wait(protocol::ControlBlock* block, uint64_t ticket);

// What passing the gate gave a launch: the block it counted into (for the rest of the launch path)
// and its launch number there.
struct GatePass {
  protocol::ControlBlock* block;
  uint64_t ticket;
};

// Counts `kernels` launches into the control block and waits when the daemon's gate is closed.
// Two relaxed loads of one cache line and one atomic add when the gate is open.
inline GatePass pass_gate(uint64_t kernels) {
  protocol::ControlBlock* block = control_block();
  uint64_t ticket = block->launches.fetch_add(kernels, std::memory_order_relaxed) + kernels;
  if (ticket > block->allowance.load(std::memory_order_relaxed) ||
      block->paused.load(std::memory_order_relaxed)) [[unlikely]]
    gate_wait(block, ticket);
  return {block, ticket};
}

}  // namespace gpushare::shim
