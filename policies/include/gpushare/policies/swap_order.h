// In which order jobs whose memory was moved to host are brought back to the device, after the
// thesis in research/thesis-oversubscription-scheduling.md ("Proposed algorithm"):
//
//   reward  = the job's compute share over a window: computation / (computation + idle)
//   penalty = the time it takes to bring the job back (its bytes / transfer bandwidth)
//   weight  = reward / penalty; equal weights: the smaller penalty first
//
// Sorted by weight, the jobs are taken alternately from the top and the bottom: a high-weight job
// (long compute, short transfer) first, then a low-weight one whose long transfer hides under the
// first one's compute, then the next high-weight one, whose short transfer the low-weight job's
// short compute is enough to hide, and so on. Pure: no clock, no I/O.
#pragma once

#include <cstdint>
#include <vector>

namespace gpushare::policies {

struct SwapCandidate {
  uint64_t job_id = 0;
  double reward = 0;     // compute share over the window, 0..1 (clamped)
  double penalty_s = 0;  // seconds to move its memory back to the device (>= 0)
};

// reward / penalty; a job with nothing to move (penalty 0) weighs more than any other.
double swap_weight(const SwapCandidate& c);

// The job ids in the order their swap-in should start.
std::vector<uint64_t> swap_in_order(std::vector<SwapCandidate> candidates);

}  // namespace gpushare::policies
