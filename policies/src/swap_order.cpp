#include "gpushare/policies/swap_order.h"

#include <algorithm>
#include <limits>

namespace gpushare::policies {

double swap_weight(const SwapCandidate& c) {
  double reward = std::clamp(c.reward, 0.0, 1.0);
  double penalty = std::max(c.penalty_s, 0.0);
  if (penalty == 0) return std::numeric_limits<double>::infinity();
  return reward / penalty;
}

std::vector<uint64_t> swap_in_order(std::vector<SwapCandidate> candidates) {
  // Heaviest first; equal weights: smaller penalty first, then the lower id (a stable answer for
  // equal jobs, so the daemon does not flip between them from tick to tick).
  std::sort(candidates.begin(), candidates.end(),
            [](const SwapCandidate& a, const SwapCandidate& b) {
              double wa = swap_weight(a), wb = swap_weight(b);
              if (wa != wb) return wa > wb;
              if (a.penalty_s != b.penalty_s) return a.penalty_s < b.penalty_s;
              return a.job_id < b.job_id;
            });
  std::vector<uint64_t> order;
  order.reserve(candidates.size());
  size_t top = 0, bottom = candidates.size();
  for (bool from_top = true; top < bottom; from_top = !from_top)
    order.push_back(from_top ? candidates[top++].job_id : candidates[--bottom].job_id);
  return order;
}

}  // namespace gpushare::policies
