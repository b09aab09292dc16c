#include "share.h"

#include <algorithm>
#include <cmath>

namespace gpushare::policies {

std::vector<double> split_by_weight(double total, std::span<const Claim> claims) {
  std::vector<double> shares(claims.size(), 0.0);
  std::vector<bool> settled(claims.size(), false);
  double left = std::max(total, 0.0);
  // Each round settles every job whose demand is below its weighted level; at most one round per
  // job, so this ends even with equal demands.
  for (size_t round = 0; round < claims.size() && left > 0; ++round) {
    double open_weight = 0;
    for (size_t i = 0; i < claims.size(); ++i)
      if (!settled[i]) open_weight += claims[i].weight;
    if (open_weight <= 0) break;
    const double level = left / open_weight;  // budget per unit of weight this round
    bool anyone_settled = false;
    for (size_t i = 0; i < claims.size(); ++i) {
      if (settled[i] || claims[i].demand > level * claims[i].weight) continue;
      shares[i] = claims[i].demand;
      left -= claims[i].demand;
      settled[i] = true;
      anyone_settled = true;
    }
    if (!anyone_settled) {
      for (size_t i = 0; i < claims.size(); ++i)
        if (!settled[i]) shares[i] = level * claims[i].weight;
      break;
    }
  }
  return shares;
}

void LaunchCost::observe(const JobObservation& job) {
  if (!job.busy_ns || job.launches == 0) return;
  const double sample = static_cast<double>(*job.busy_ns) / static_cast<double>(job.launches);
  if (sample <= 0) return;
  // A short memory: a job's kernel mix changes between phases (forward, backward, evaluation).
  ns_per_launch = known() ? 0.7 * ns_per_launch + 0.3 * sample : sample;
}

uint64_t whole_launches(double launches, double& carry) {
  if (!std::isfinite(launches)) return kUnlimited;
  const double wanted = std::max(launches, 0.0) + carry;
  const double whole = std::floor(wanted);
  carry = wanted - whole;
  if (whole >= static_cast<double>(kUnlimited - 1)) return kUnlimited - 1;
  return static_cast<uint64_t>(whole);
}

}  // namespace gpushare::policies
