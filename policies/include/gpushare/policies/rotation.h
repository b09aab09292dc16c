// Rotating residency: when the opportunistic jobs on a device need more memory than
// production leaves, they run in turns. The job whose turn it is (and whoever else fits after it in
// the order) stays resident and runs; the others wait with their memory on the host; while a turn
// computes, the next job's memory is copied in (prefetch), so the switch costs only what the copy
// engine could not hide. Production is never part of a rotation: its bytes are taken off the
// capacity first and nothing here ever moves them.
//
// The order is the thesis's weight order (policies/swap_order.h: reward / penalty, alternating the
// highest and the lowest weight), FIFO (registration order) or a fixed list. A turn lasts at least
// `min_turn_s` and at least `turn_per_swap_in` times the next job's swap-in, so that a copy that
// cannot be hidden costs at most that fraction of a turn. Pure: no clock, no I/O; the simulator
// (tools/sim, `gpushare-sim memory`) calls it, and gpushared is to call the same function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace gpushare::policies {

enum class RotationOrder { weight, fifo, fixed };

struct RotationJob {
  uint64_t job_id = 0;
  uint64_t bytes = 0;     // device memory the job needs resident to run
  double reward = 0;      // the thesis reward: compute / (compute + idle) over a window, 0..1
  double swap_in_s = 0;   // the thesis penalty: bytes / host-to-device bandwidth, resident or not
  uint64_t arrival = 0;   // registration order (FIFO: lower first, then lower id)
  bool resident = false;  // its memory is on the device now (wholly or partly)
  // The most it has held on the device (0: as `bytes`): the room it will need again. A job that
  // starts, or grows again after a swap-in, reaches it over several steps.
  uint64_t peak_bytes = 0;
  // Its memory grew lately: its working set is not known yet, so nothing is prefetched beside it.
  bool growing = false;
};

// The room a job is given: the most it has held, not what it holds now.
inline uint64_t room_needed(const RotationJob& job) { return std::max(job.bytes, job.peak_bytes); }

struct RotationParameters {
  RotationOrder order = RotationOrder::weight;
  std::vector<uint64_t> fixed_order;  // RotationOrder::fixed; jobs not listed follow in FIFO order
  bool prefetch = true;
  double min_turn_s = 1.0;
  double turn_per_swap_in = 4.0;  // a copy left unhidden then costs at most 1/4 of a turn
};

struct RotationState {
  uint64_t capacity_bytes = 0;           // device memory gpushare hands out
  uint64_t production_bytes = 0;         // held by production jobs: always kept
  std::vector<RotationJob> jobs;         // the opportunistic jobs on the device
  std::optional<uint64_t> current;       // whose turn it is; may have left (then its successor in
                                         // previous_order that is still here takes the turn)
  double turn_elapsed_s = 0;             // how long the current turn has lasted
  std::vector<uint64_t> previous_order;  // the order of the last decision
};

struct RotationDecision {
  bool rotating = false;             // false: every job fits, all stay resident and run
  std::vector<uint64_t> order;       // the cycle, from the job whose turn it is
  std::vector<uint64_t> run;         // resident and running in this turn (a prefix of order)
  std::optional<uint64_t> prefetch;  // whose memory to copy in while this turn computes
  uint64_t prefetch_bytes = 0;       // how much of it fits before the switch (the rest after)
  std::vector<uint64_t> swap_out;    // resident jobs whose memory goes to the host now
  std::vector<uint64_t> too_large;   // jobs that do not fit even alone: they wait
  double turn_s = 0;                 // length of this turn (0 when not rotating)
  uint64_t budget_bytes = 0;         // capacity less production
};

// The jobs' ids in rotation order (weight: the thesis's alternation; ties as swap_in_order).
std::vector<uint64_t> rotation_order(const std::vector<RotationJob>& jobs,
                                     const RotationParameters& parameters);

// Who runs, who is prefetched and who goes out for the turn that is current in `state`.
RotationDecision decide_rotation(const RotationState& state, const RotationParameters& parameters);

}  // namespace gpushare::policies
