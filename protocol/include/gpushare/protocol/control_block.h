// The per-client shared-memory control block: how launch counts reach the daemon and how the
// daemon's gate reaches the shim, with no socket round trip per launch (DESIGN.md §2).
//
// The daemon creates it (memfd, one page), passes it to the shim with SCM_RIGHTS at registration,
// and both map it. Every field is a lock-free atomic of fixed width, so the layout is the same in
// both processes. The daemon treats every value the shim writes as untrusted: counters are only
// ever compared with their previous sample and clamped.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpushare::protocol {

inline constexpr uint32_t kControlBlockMagic = 0x47505342;  // "GPSB"
inline constexpr uint32_t kControlBlockVersion = 1;
inline constexpr uint64_t kUnlimited = ~uint64_t{0};

enum class JobClass : uint32_t { production = 0, opportunistic = 1 };

struct alignas(64) ControlBlock {
  // Written once by the daemon before the block is handed over.
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;

  // Shim -> daemon. Bumped with relaxed atomics on the launch path; the daemon samples them every
  // tick and derives rates from differences.
  alignas(64) std::atomic<uint64_t> launches;        // kernel launches of all entry points
  std::atomic<uint64_t> graph_launches;              // cuGraphLaunch calls
  std::atomic<uint64_t> gated_ns;                    // time launches spent waiting at the gate
  std::atomic<uint64_t> gate_waits;                  // launches that had to wait

  // Daemon -> shim.
  // A launch numbered n (the value of `launches` after its own increment) may proceed while
  // n <= allowance. kUnlimited opens the gate. `paused` holds every launch regardless.
  alignas(64) std::atomic<uint64_t> allowance;
  std::atomic<uint32_t> paused;
  std::atomic<uint32_t> job_class;                   // JobClass granted by the daemon
  // Futex word: the daemon bumps it after every change of allowance/paused/job_class and wakes
  // all waiters. A blocked launch sleeps on it, never spins.
  std::atomic<uint32_t> gate_seq;
};

static_assert(sizeof(ControlBlock) <= 4096, "the control block must fit one page");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
inline constexpr size_t kControlBlockSize = 4096;

}  // namespace gpushare::protocol
