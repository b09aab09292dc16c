#include "concurrency_budget.h"

#include <algorithm>
#include <cmath>

namespace gpushare::policies {
namespace {

struct Moments {
  double mean = 0;
  double relative_error = 0;  // standard error of the mean / mean
};

Moments moments(const std::deque<double>& values) {
  const double n = static_cast<double>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  Moments m{.mean = sum / n};
  double squares = 0;
  for (double v : values) squares += (v - m.mean) * (v - m.mean);
  const double variance = n > 1 ? squares / (n - 1) : 0;
  m.relative_error = m.mean > 0 ? std::sqrt(variance / n) / m.mean : 0;
  return m;
}

}  // namespace

double concurrency_share(const std::optional<ConcurrencyCost>& cost,
                         const ConcurrencySettings& settings) {
  if (!cost) return std::clamp(settings.initial_share, settings.min_share, settings.max_share);
  const double allowed = 1 - settings.target;  // production's loss the target leaves
  const double harm = cost->harm + settings.noise_margin * cost->error;
  if (harm <= allowed) return settings.max_share;
  return std::clamp(allowed / harm, settings.min_share, settings.max_share);
}

std::optional<ConcurrencyCost> concurrency_cost(const std::deque<double>& gated,
                                                const std::deque<double>& beside) {
  if (gated.size() < kMinCostSamples || beside.size() < kMinCostSamples) return std::nullopt;
  const Moments g = moments(gated), b = moments(beside);
  if (g.mean <= 0) return std::nullopt;
  const double ratio = b.mean / g.mean;
  return ConcurrencyCost{
      .harm = 1 - ratio,
      .error = ratio * std::hypot(g.relative_error, b.relative_error),
  };
}

void ConcurrencyBudget::record(uint64_t job, Mode mode, double work, double busy_ns) {
  if (!(work > 0) || !(busy_ns > 0)) return;
  std::deque<double>& speeds = mode == Mode::gated ? jobs_[job].gated : jobs_[job].beside;
  const double speed = work / (busy_ns / 1e9);
  if (!speeds.empty()) {
    const double mean = moments(speeds).mean;
    if (std::abs(speed - mean) > kReplaceDeviation * mean) speeds.clear();
  }
  speeds.push_back(speed);
  while (speeds.size() > settings_.samples) speeds.pop_front();
}

void ConcurrencyBudget::retain(const std::set<uint64_t>& alive) {
  std::erase_if(jobs_, [&](const auto& entry) { return !alive.count(entry.first); });
}

std::optional<ConcurrencyCost> ConcurrencyBudget::deciding_cost() const {
  std::optional<ConcurrencyCost> deciding;
  for (const auto& [id, speeds] : jobs_) {
    const std::optional<ConcurrencyCost> cost = concurrency_cost(speeds.gated, speeds.beside);
    if (cost && (!deciding || concurrency_share(cost, settings_) <
                                  concurrency_share(deciding, settings_)))
      deciding = cost;
  }
  return deciding;
}

double ConcurrencyBudget::share() const {
  if (jobs_.empty()) return concurrency_share(std::nullopt, settings_);
  double lowest = settings_.max_share;
  for (const auto& [id, speeds] : jobs_)
    lowest = std::min(lowest, concurrency_share(concurrency_cost(speeds.gated, speeds.beside), settings_));
  return lowest;
}

ConcurrencyBudget::Mode ConcurrencyBudget::next_period() {
  credit_ += share();
  if (credit_ >= 1) {
    credit_ -= 1;
    return Mode::beside;
  }
  return Mode::gated;
}

}  // namespace gpushare::policies
