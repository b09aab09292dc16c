#include "queue_bound.h"

#include <algorithm>
#include <cmath>

#include "median.h"

namespace gpushare::policies {

uint32_t queue_bound(double kernels_per_s, double queue_ms, uint32_t least) {
  least = std::clamp<uint32_t>(least, 1, kMostQueued);
  const double kernels = kernels_per_s * queue_ms / 1000;
  if (!(kernels > least)) return least;  // also NaN
  return kernels >= kMostQueued ? kMostQueued : static_cast<uint32_t>(std::ceil(kernels));
}

void QueueRate::record(double kernels_per_s) {
  if (!(kernels_per_s > 0) || std::isinf(kernels_per_s)) return;
  rates_.push_back(kernels_per_s);
  while (rates_.size() > kQueueRateWindows) rates_.pop_front();
}

uint32_t QueueRate::bound(double queue_ms, uint32_t least) const {
  if (!(queue_ms > 0) || rates_.size() < kQueueRateLeast) return 0;
  return queue_bound(median(rates_.begin(), rates_.end()), queue_ms, least);
}

}  // namespace gpushare::policies
