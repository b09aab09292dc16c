// Splitting a launch budget among jobs of one class, shared by the `tgs` and `fair` policies.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "gpushare/policies/policy.h"

namespace gpushare::policies {

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();
inline constexpr double kNsPerSecond = 1e9;
// Rates are per second; a window this short (or a zero window from a confused caller) is
// treated as this long so that no rate becomes infinite.
inline constexpr uint64_t kMinWindowNs = 1'000'000;

inline double window_seconds(const DeviceObservation& device) {
  return static_cast<double>(device.window_ns < kMinWindowNs ? kMinWindowNs : device.window_ns) /
         kNsPerSecond;
}

struct Claim {
  double weight = 1.0;       // > 0
  double demand = kNoLimit;  // the most this job can use, or kNoLimit when it wants more
};

// Weighted max-min split ("water-filling") of `total` among `claims`: no job gets more than its
// demand, and what a job leaves unused goes to the others in proportion to their weights.
std::vector<double> split_by_weight(double total, std::span<const Claim> claims);

// GPU time per launch of one job, learnt from the busy time the shim reports. A split of launches
// in proportion to weight / cost is a split of GPU time in proportion to weight.
struct LaunchCost {
  double ns_per_launch = 0;  // 0 until the first window with launches and busy time
  void observe(const JobObservation& job);
  bool known() const { return ns_per_launch > 0; }
};

// Turns a fractional launch budget into whole launches for one window, carrying the remainder to
// the next so that a rate below one launch per window still gets through on average.
uint64_t whole_launches(double launches, double& carry);

}  // namespace gpushare::policies
