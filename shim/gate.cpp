#include "gate.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "gpushare/protocol/futex.h"

namespace gpushare::shim {
namespace {

// Process-local and never gated: used before registration and whenever no daemon is reachable.
// Constant-initialised (an open gate, see control_block.h), so a launch from another library's
// constructor finds it ready.
constinit protocol::ControlBlock g_local_block{};

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

protocol::ControlBlock* local_control_block() { return &g_local_block; }

constinit std::atomic<protocol::ControlBlock*> g_control_block{&g_local_block};

void set_control_block(protocol::ControlBlock* block) {
  g_control_block.store(block ? block : local_control_block(), std::memory_order_release);
  // Wake launches sleeping at the old gate so they re-read which block is in force.
  protocol::futex_wake_all(&local_control_block()->gate_seq);
}

void gate_wait(protocol::ControlBlock* block, uint64_t ticket) {
  uint64_t start = now_ns();
  block->gate_waits.fetch_add(1, std::memory_order_relaxed);
  for (;;) {
    uint32_t seq = block->gate_seq.load(std::memory_order_acquire);
    bool open = ticket <= block->allowance.load(std::memory_order_acquire) &&
                !block->paused.load(std::memory_order_acquire);
    // A block that is no longer in force (daemon gone: the link switched back to the local,
    // open block) must never keep the host program waiting.
    if (open || control_block() != block) break;
    // Not FUTEX_PRIVATE: the word lives in memory shared with the daemon. The timeout bounds the
    // cost of a wake-up lost to a daemon that died between its store and its FUTEX_WAKE.
    protocol::futex_wait(&block->gate_seq, seq, 100'000'000);
  }
  block->gated_ns.fetch_add(now_ns() - start, std::memory_order_relaxed);
}

}  // namespace gpushare::shim
