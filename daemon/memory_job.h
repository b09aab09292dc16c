// What the memory broker (docs/memory.md) keeps per job, beside the job's declared allocations.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gpushare::daemon {

// Where a job's swappable memory is, as the daemon sees it. The shim moves it; the daemon asks
// through the control block and learns it is done from the acknowledged sequence number.
// prefetched: rotation (docs/memory.md) brought `prefetched` of its bytes back ahead of its turn;
// it stays paused, the rest on host, until its turn comes.
enum class SwapState { resident, swapping_out, swapped_out, swapping_in, prefetched };
const char* swap_state_name(SwapState s);

struct JobMemory {
  SwapState state = SwapState::resident;
  uint32_t request_seq = 0;  // the last request written to the control block
  std::chrono::steady_clock::time_point requested;
  // A swap-in bounded to this many more bytes (rotation's prefetch); nullopt: all of it.
  std::optional<uint64_t> swap_in_bound;
  // While only part of its swappable memory is on the device (prefetched, a bounded swap-in, a
  // swap-out that started from there, or one whose moves the driver refused in part: swapped out
  // with the rest still on the device): how much is, as its shim reported the moves (clamped to
  // its swappable bytes wherever counted; one count for all its devices, so a job on several
  // errs toward production). nullopt: all of it or none, as the state says.
  std::optional<uint64_t> partly_on_device;
  // Set by `gpusharectl set-limit`: a limit (or, holding nullopt, "none") that replaces the
  // configured rule for this job. Absent: the configuration decides.
  std::optional<std::optional<uint64_t>> limit_override;
  // The thesis's reward: the share of recent ticks in which the job launched work (an
  // exponentially weighted average), frozen while the job is paused for memory.
  double reward = 0;
  uint64_t launches_seen = 0;
  double bytes_per_second = 0;  // measured on its last swap; 0: not measured yet
  uint64_t swaps_out = 0, swaps_in = 0;
  uint64_t swapped_out_bytes = 0, swapped_in_bytes = 0;  // as the shim reported each swap
  // Declarations checked against NVML (memory_audit.h): what its process holds (nullopt: not
  // measured), and the declared bytes per device that admission no longer counts because its
  // declarations exceed that by more than the slack for longer than the grace period.
  std::optional<uint64_t> measured_bytes;
  std::map<int, uint64_t> unhonoured;
  // Allocation sites (GPUSHARE_TRACE_ALLOC=1): site id -> description, from the shim.
  std::map<uint32_t, std::string> sites;
};

}  // namespace gpushare::daemon
