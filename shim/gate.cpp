#include "gate.h"

#include <time.h>

#include "gpushare/protocol/futex.h"
#include "stream_capture.h"

namespace gpushare::shim {
namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Lets every launch through a block the daemon no longer serves, and wakes those asleep on it.
void open_gate(protocol::ControlBlock* block) {
  block->allowance.store(protocol::kUnlimited, std::memory_order_release);
  block->paused.store(0, std::memory_order_release);
  block->gate_seq.fetch_add(1, std::memory_order_acq_rel);
  protocol::futex_wake_all(&block->gate_seq);
}

}  // namespace

void set_control_block(ShimContext& ctx, protocol::ControlBlock* block) {
  ctx.block.store(block ? block : local_control_block(ctx), std::memory_order_release);
  // Wake launches sleeping at the old gate so they re-read which block is in force.
  protocol::futex_wake_all(&local_control_block(ctx)->gate_seq);
}

void fall_back_to_local(ShimContext& ctx) {
  protocol::ControlBlock* old = control_block(ctx);
  set_control_block(ctx, local_control_block(ctx));
  if (old != local_control_block(ctx)) open_gate(old);
}

void gate_wait(const ShimContext& ctx, protocol::ControlBlock* block, uint64_t ticket,
               LaunchStream stream) {
  if (stream.known) {
    const DriverCalls& d = ctx.driver();
    RelaxedCapture relaxed(d);
    if (capturing(d, stream.stream, stream.per_thread)) return;
  }
  uint64_t start = now_ns();
  block->gate_waits.fetch_add(1, std::memory_order_relaxed);
  for (;;) {
    uint32_t seq = block->gate_seq.load(std::memory_order_acquire);
    bool open = ticket <= block->allowance.load(std::memory_order_acquire) &&
                !block->paused.load(std::memory_order_acquire);
    // A block that is no longer in force (daemon gone: the link switched back to the local,
    // open block) must never keep the host program waiting.
    if (open || control_block(ctx) != block) break;
    // Not FUTEX_PRIVATE: the word lives in memory shared with the daemon. The timeout bounds the
    // cost of a wake-up lost to a daemon that died between its store and its FUTEX_WAKE.
    protocol::futex_wait(&block->gate_seq, seq, 100'000'000);
  }
  block->gated_ns.fetch_add(now_ns() - start, std::memory_order_relaxed);
}

}  // namespace gpushare::shim
