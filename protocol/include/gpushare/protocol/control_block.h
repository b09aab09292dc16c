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

#include "gpushare/policies/job_class.h"

namespace gpushare::protocol {

inline constexpr uint32_t kControlBlockMagic = 0x47505342;  // "GPSB"
inline constexpr uint32_t kControlBlockVersion = 1;
// One definition of the class and of "unlimited" for the wire and the policies alike.
using policies::JobClass;
using policies::kUnlimited;

// Bits of ControlBlock::paused: the policies' gate and the memory broker pause independently (the
// shim's gate only asks whether any bit is set).
inline constexpr uint32_t kPausedByPolicy = 1;
inline constexpr uint32_t kPausedForMemory = 2;
// Kernel-level idle gating (docs/protocol.md): set and cleared by the daemon's idle relay, every
// ~250 µs, on an opportunistic job whose gate is production_idle_only, while a production job on
// its device has work in flight.
inline constexpr uint32_t kPausedWhileProductionBusy = 4;

// Where a job's swappable memory is (docs/memory.md).
enum class Residency : uint32_t { device = 0, host = 1 };
inline constexpr size_t kMemoryViews = 8;

// Default member values are an open gate, so a value-initialised block (the shim's local one)
// never holds a launch.
struct alignas(64) ControlBlock {
  // Written once by the daemon before the block is handed over.
  uint32_t magic = kControlBlockMagic;
  uint32_t version = kControlBlockVersion;
  uint64_t job_id = 0;

  // Shim -> daemon. Bumped with relaxed atomics on the launch path; the daemon samples them every
  // tick and derives rates from differences.
  alignas(64) std::atomic<uint64_t> launches;        // kernel launches of all entry points
  std::atomic<uint64_t> graph_launches;              // cuGraphLaunch calls
  std::atomic<uint64_t> gated_ns;                    // time launches spent waiting at the gate
  std::atomic<uint64_t> gate_waits;                  // launches that had to wait

  // Daemon -> shim.
  // A launch numbered n (the value of `launches` after its own increment) may proceed while
  // n <= allowance. kUnlimited opens the gate. `paused` holds every launch regardless.
  alignas(64) std::atomic<uint64_t> allowance{kUnlimited};
  std::atomic<uint32_t> paused;
  std::atomic<uint32_t> job_class{static_cast<uint32_t>(JobClass::opportunistic)};  // granted
  // Futex word: the daemon bumps it after every change of allowance/paused/job_class and wakes
  // all waiters. A blocked launch sleeps on it, never spins.
  std::atomic<uint32_t> gate_seq;

  // Memory oversubscription (docs/memory.md). Added at the end: the offsets above are unchanged.
  // Daemon -> shim: where the job's swappable (managed) memory must be. The daemon writes
  // memory_target, then bumps memory_request_seq (a futex word the shim's swap thread sleeps on).
  alignas(64) std::atomic<uint32_t> memory_target;  // Residency
  std::atomic<uint32_t> memory_request_seq;
  // Shim -> daemon: the last request carried out, where the memory is now, and what it cost.
  std::atomic<uint32_t> memory_done_seq;
  std::atomic<uint32_t> memory_residency;  // Residency
  std::atomic<uint64_t> swap_bytes;        // bytes moved by the last completed request
  std::atomic<uint64_t> swap_ns;           // how long that took
  // Daemon -> shim: the job's view of device memory, one entry per device it uses (total 0: no
  // view published, the shim passes the driver's answer through).
  struct MemoryView {
    std::atomic<int32_t> device;  // physical device index
    std::atomic<uint32_t> reserved;
    std::atomic<uint64_t> total_bytes;  // min(job limit, device capacity)
    std::atomic<uint64_t> free_bytes;   // what the job may still allocate
  };
  MemoryView memory_views[kMemoryViews];
  // Daemon -> shim: 1 when this job's device allocations are to be made swappable (managed)
  // memory: an opportunistic job on a daemon whose config sets memory.oversubscribe.
  std::atomic<uint32_t> swappable_memory;

  // In-flight bound (docs/protocol.md). Added at the end: the offsets above are unchanged.
  // Daemon -> shim: launches of this job that may be on the GPU, not known complete, before its
  // next launch waits for the oldest to finish; 0 is no bound (production jobs never get one).
  alignas(64) std::atomic<uint32_t> max_in_flight;
  // Shim -> daemon, while the shim tracks completions (in_flight_tracked = 1): its launches not
  // yet known complete, as of its last launch.
  std::atomic<uint32_t> in_flight;
  std::atomic<uint32_t> in_flight_tracked;

  // Streaming swap-out (docs/memory.md). Added at the end: the offsets above are unchanged.
  // Shim -> daemon, while it moves memory to host: how much of request swap_progress_seq has left
  // the device and is known complete (its prefetches synchronised), so that a waiting production
  // allocation is admitted as soon as enough room is free, not when the whole job is on host.
  // The shim stores bytes = 0 before it stores a new seq (release), then the bytes after each
  // allocation: a daemon that reads the seq (acquire) it asked for never gets an older request's
  // bytes. Untrusted: the daemon clamps the bytes to the job's swappable memory.
  alignas(64) std::atomic<uint32_t> swap_progress_seq;
  std::atomic<uint64_t> swap_progress_bytes;

  // Completion signal (docs/protocol.md). Added at the end: the offsets above are unchanged.
  // Daemon -> shim: record a completion mark (an event on the launch's stream) at every launch
  // whose number is a multiple of this power of two; 0: no marks. Production jobs get one, so
  // that the policies see the work the GPU finished, not only what the CPU queued.
  alignas(64) std::atomic<uint32_t> completion_stride;
  // Shim -> daemon, while completion_tracked = 1: the launch number of the latest mark known
  // complete (every launch before it on that mark's stream has finished), and how many marks are
  // recorded but not yet seen complete. Untrusted: the daemon never lets completed pass launches.
  std::atomic<uint32_t> completion_tracked;
  std::atomic<uint64_t> completed_launches;
  std::atomic<uint32_t> marks_pending;

  // Kernel-level idle gating (docs/protocol.md). Added at the end: the offsets above are unchanged.
  // Shim -> daemon: the launch number of the latest mark recorded (stored when it is recorded, so
  // completed_launches < last_mark_launch means marked work is still on the GPU, even before the
  // poller has looked). Untrusted: the daemon only compares it with its own samples.
  alignas(64) std::atomic<uint64_t> last_mark_launch;
  // Daemon -> shim: how often the poller queries its marks while some are pending, in µs (0: the
  // shim's default, 1 ms); the daemon asks for less where an opportunistic job waits on the answer.
  std::atomic<uint32_t> completion_poll_us;

  // Rotation's prefetch (docs/memory.md, "Rotating residency"). Added at the end: the offsets
  // above are unchanged. Daemon -> shim, stored before memory_request_seq: a request towards the
  // device brings in at most this many bytes, whole allocations, the largest that still fit
  // first; 0: all of it. The job stays paused meanwhile: only the bytes move ahead of its turn.
  alignas(64) std::atomic<uint64_t> memory_target_bytes;

  // Moves beside stream captures (docs/memory.md). Added at the end: the offsets above are
  // unchanged. Daemon -> shim: how long a move of the job's memory waits for the program's graph
  // captures in progress to end (a move's context synchronisation would invalidate them), in ms;
  // 0: the shim's default, 1000. The daemon gives half its memory.swap_timeout_ms, so that a
  // production allocation waiting for the room is served before it would be let through.
  std::atomic<uint32_t> capture_patience_ms;

  // Moves that fail (docs/memory.md, "A move that fails"). Added at the end: the offsets above
  // are unchanged. Shim -> daemon, stored before memory_done_seq: of the last completed request
  // towards the host, the bytes whose move the driver refused, which stay on the device (a GPU
  // without concurrent managed access refuses every prefetch). Untrusted: the daemon clamps them
  // to the job's swappable memory.
  std::atomic<uint64_t> swap_unmoved_bytes;
};

static_assert(sizeof(ControlBlock) <= 4096, "the control block must fit one page");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
inline constexpr size_t kControlBlockSize = 4096;

}  // namespace gpushare::protocol
