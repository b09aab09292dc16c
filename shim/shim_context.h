// The shim's process-wide state that the launch path depends on, in one explicit object: which
// control block is in force, the process-local block that stands in for the daemon's, the driver's
// event functions, the in-flight tracker and the completion marks.
//
// The real shim has exactly one, g_shim: constant-initialised, so a launch from another library's
// constructor finds it ready, and never destroyed, since a launch may run during exit(). The launch
// path reads g_shim.block directly, a load from a fixed address as with a plain global, so the
// context costs the hot path nothing. A test builds its own context with its control blocks in
// ordinary memory and fake driver functions, and drives gate_wait and the in-flight tracker
// against it (tests/shim/gate_test.cpp, tests/shim/in_flight_test.cpp), and records and polls
// completion marks (tests/shim/completions_test.cpp).
//
// Lifetime: a context outlives every launch that counts into it and every control block put in
// force in it (blocks are never unmapped: a launch may still hold one). The in-flight and
// completion trackers are made on first use; g_shim's live as long as the process, and a test's
// context deletes its own (in_flight_release, completions_release) when it goes.
#pragma once

#include <atomic>
#include <cstdint>

#include "driver_calls.h"
#include "gpushare/protocol/control_block.h"

namespace gpushare::shim {

class InFlightTracker;    // in_flight.h
class CompletionTracker;  // completions.h

// The launch number that records the next completion mark while completions are off.
inline constexpr uint64_t kNoMark = ~uint64_t{0};

struct ShimContext {
  constexpr explicit ShimContext(const DriverCalls& (*driver_functions)())
      : block{&local_block},
        local_block{},
        driver{driver_functions},
        in_flight{nullptr},
        next_mark{kNoMark},
        completions{nullptr} {}
  ShimContext(const ShimContext&) = delete;  // `block` may point into the object itself
  ShimContext& operator=(const ShimContext&) = delete;

  // The control block the launch path counts into and obeys. Before registration (or with no
  // daemon) it is `local_block`, whose gate is open, so the launch path never checks for null.
  // Replaced atomically on (re-)registration (set_control_block, gate.h); an old block is never
  // unmapped, because another thread may still be inside a launch that read it.
  std::atomic<protocol::ControlBlock*> block;
  // Process-local and never gated: in force before registration and whenever no daemon is
  // reachable. Value-initialised: an open gate (control_block.h).
  protocol::ControlBlock local_block;
  // The driver's entry points the in-flight bound calls (events, stream capture): driver_calls()
  // for the real shim, whose functions resolve once libcuda is loaded.
  const DriverCalls& (*driver)();
  // The in-flight bound's state (in_flight.h), made on first use.
  std::atomic<InFlightTracker*> in_flight;
  // The launch number that records the next completion mark (completions.h; kNoMark: off), read
  // by every launch, and the marks' state, made on first use.
  std::atomic<uint64_t> next_mark;
  std::atomic<CompletionTracker*> completions;
};

// The process's context: the one the hooks use.
extern constinit ShimContext g_shim;

inline protocol::ControlBlock* control_block(const ShimContext& ctx) {
  return ctx.block.load(std::memory_order_acquire);
}
inline protocol::ControlBlock* local_control_block(ShimContext& ctx) {
  return &ctx.local_block;
}

// The same for the process's context, for the code off the launch path (daemon link, memory,
// completions, the report).
inline protocol::ControlBlock* control_block() {
  return control_block(g_shim);
}
inline protocol::ControlBlock* local_control_block() {
  return local_control_block(g_shim);
}

}  // namespace gpushare::shim
