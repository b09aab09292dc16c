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

double idle_queue_ms(std::optional<double> busy_phase_s, double queue_ms, double most_ms) {
  if (!(most_ms > 0)) return 0;
  const double least = std::max(0.0, queue_ms);
  const double share = busy_phase_s && *busy_phase_s > 0 ? kReturnShare * *busy_phase_s * 1000 : 0;
  return std::min(most_ms, std::max(least, share));
}

double beside_queue_ms(std::optional<double> busy, double gaps_limit, double queue_ms,
                       double loop_ms) {
  return std::max(0.0, busy && *busy >= gaps_limit ? loop_ms : queue_ms);
}

void BusyPhases::busy(uint64_t window_ns) {
  current_ns_ += window_ns;
}

void BusyPhases::end() {
  if (current_ns_ == 0) return;  // idle again without a busy window: no phase
  phases_s_.push_back(static_cast<double>(current_ns_) / 1e9);
  while (phases_s_.size() > kBusyPhasesKept) phases_s_.pop_front();
  current_ns_ = 0;
}

void BusyPhases::drop() {
  current_ns_ = 0;
}

std::optional<double> BusyPhases::typical_s() const {
  if (phases_s_.empty()) return std::nullopt;
  return median(phases_s_.begin(), phases_s_.end());
}

}  // namespace gpushare::policies
