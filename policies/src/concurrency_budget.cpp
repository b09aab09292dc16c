#include "concurrency_budget.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

constexpr size_t index(RunMode mode) { return static_cast<size_t>(mode); }

// A cost taken `noise_margin` standard errors low (the benefit of the doubt) or high.
double charged_low(const ModeCost& c, const ConcurrencySettings& s) {
  return std::max(0.0, c.harm - s.noise_margin * c.error);
}
double charged_high(const ModeCost& c, const ConcurrencySettings& s) {
  return std::max(0.0, c.harm + s.noise_margin * c.error);
}

}  // namespace

std::optional<ModeCost> mode_cost(const std::deque<double>& paused,
                                  const std::deque<double>& mode) {
  if (paused.size() < kMinCostSamples || mode.size() < kMinCostSamples) return std::nullopt;
  const Moments p = moments(paused), m = moments(mode);
  if (p.mean <= 0) return std::nullopt;
  const double ratio = m.mean / p.mean;
  return ModeCost{.harm = 1 - ratio, .error = ratio * std::hypot(p.relative_error, m.relative_error)};
}

double loss_debt(const std::array<double, kRunModes>& weights, const ModeMeasures& measures,
                 const ConcurrencySettings& settings) {
  double total = 0, lost = 0;
  for (size_t m = 0; m < kRunModes; ++m) {
    if (!measures.cost[m]) return 0;  // unknown until every cost is measured
    const ModeCost& cost = *measures.cost[m];
    total += weights[m];
    lost += weights[m] * charged_low(cost, settings);
  }
  // Only a loss beyond the target is carried: a budget left unspent is not banked for later.
  return std::max(0.0, lost - (1 - settings.target) * total) / kDebtHorizon;
}

std::array<double, kRunModes> mode_shares(const ModeMeasures& measures,
                                          const ConcurrencySettings& settings, double debt) {
  constexpr std::array<RunMode, 2> kCandidates{RunMode::beside, RunMode::gated};
  std::array<double, kRunModes> shares{};
  for (RunMode m : kCandidates) {
    if (!measures.cost[index(m)] || !measures.gain[index(m)]) {
      shares.fill(1.0 / kRunModes);  // still learning: every mode measured alike
      return shares;
    }
  }
  // What the target allows, less what exploring the candidates will spend if the budget, not the
  // time, ends up limiting them. A candidate whose cost, taken low by its noise, fits the budget
  // over all the time it could get is charged that: a loss the measurements cannot tell from
  // nothing does not throttle. Any other is charged its cost taken high: where throttling is
  // shown to be needed, it errs toward production.
  const double time = 1 - settings.reference_share;
  const double allowed = std::max(0.0, 1 - settings.target - debt);
  std::array<double, kRunModes> cost{};
  double budget = allowed;
  for (RunMode m : kCandidates) {
    const ModeCost& c = *measures.cost[index(m)];
    const double low = charged_low(c, settings);
    cost[index(m)] = low * time <= allowed ? low : charged_high(c, settings);
    budget -= settings.explore_share * cost[index(m)];
  }
  budget = std::max(0.0, budget);
  // The best point of a two-variable linear programme: maximise gain_g x f_g + gain_b x f_b with
  // f_g + f_b <= time and cost_g x f_g + cost_b x f_b <= budget. The optimum is a vertex: each
  // mode alone as far as time or budget allows, or both with time and budget used up.
  const size_t g = index(RunMode::gated), b = index(RunMode::beside);
  const double gain_g = std::max(0.0, *measures.gain[g]), gain_b = std::max(0.0, *measures.gain[b]);
  auto alone = [&](double c) { return c > 0 ? std::min(time, budget / c) : time; };
  std::array<std::pair<double, double>, 4> vertices{{{0, 0}, {alone(cost[g]), 0}, {0, alone(cost[b])}, {0, 0}}};
  if (cost[b] != cost[g]) {
    const double f_b = (budget - cost[g] * time) / (cost[b] - cost[g]);
    if (f_b >= 0 && f_b <= time) vertices[3] = {time - f_b, f_b};
  }
  std::pair<double, double> best{0, 0};
  double best_gain = -1, best_cost = 0;
  for (const auto& [f_g, f_b] : vertices) {
    const double spent = cost[g] * f_g + cost[b] * f_b;
    if (f_g + f_b > time + 1e-9 || spent > budget + 1e-9) continue;
    const double gain = gain_g * f_g + gain_b * f_b;
    if (gain > best_gain + 1e-12 || (std::abs(gain - best_gain) <= 1e-12 && spent < best_cost)) {
      best = {f_g, f_b};
      best_gain = gain;
      best_cost = spent;
    }
  }
  shares[g] = best.first;
  shares[b] = best.second;
  double left = time - best.first - best.second;
  // Each candidate is run at least explore_share, so that what it costs and gains stays measured
  // (a cost that falls, a gain that rises: production's load or the opportunistic job changed).
  // Time left over means the budget limited the candidates: from that time. Otherwise from the
  // other candidate's: a mode given no time is never measured again, and one wrong measurement
  // (on the H100, a gain of 0 read while the opportunistic job was still starting) would keep it
  // out for good.
  for (RunMode m : kCandidates) {
    const double wanted = std::max(0.0, settings.explore_share - shares[index(m)]);
    if (wanted <= 0) continue;
    const double from_left = std::min(left, wanted);
    left -= from_left;
    const size_t other = index(m == RunMode::beside ? RunMode::gated : RunMode::beside);
    const double from_other =
        std::min(wanted - from_left, std::max(0.0, shares[other] - settings.explore_share));
    shares[other] -= from_other;
    shares[index(m)] += from_left + from_other;
  }
  shares[index(RunMode::paused)] = 1 - shares[index(RunMode::beside)] - shares[index(RunMode::gated)];
  return shares;
}

void ConcurrencyBudget::add(std::deque<double>& samples, double value) const {
  samples.push_back(value);
  while (samples.size() > settings_.samples) samples.pop_front();
}

void ConcurrencyBudget::record_speed(uint64_t job, RunMode mode, double work, double busy_ns) {
  if (!(work > 0) || !(busy_ns > 0)) return;
  std::deque<double>& speeds = speeds_[job][index(mode)];
  std::deque<double>& outliers = outliers_[job][index(mode)];
  const double speed = work / (busy_ns / 1e9);
  const double mean = speeds.empty() ? speed : moments(speeds).mean;
  if (std::abs(speed - mean) <= kReplaceDeviation * mean) {
    outliers.clear();
    add(speeds, speed);
    return;
  }
  // Far off: held back until kReplaceRun of them in a row, on the same side, show a changed job.
  if (!outliers.empty() && (outliers.back() > mean) != (speed > mean)) outliers.clear();
  outliers.push_back(speed);
  if (outliers.size() < kReplaceRun) return;
  speeds.clear();
  for (double s : outliers) add(speeds, s);
  outliers.clear();
}

void ConcurrencyBudget::record_gain(RunMode mode, double launches) {
  if (launches >= 0) add(gains_[index(mode)], launches);
}

void ConcurrencyBudget::retain(const std::set<uint64_t>& alive) {
  std::erase_if(speeds_, [&](const auto& entry) { return !alive.count(entry.first); });
  std::erase_if(outliers_, [&](const auto& entry) { return !alive.count(entry.first); });
}

ModeMeasures ConcurrencyBudget::measures() const {
  ModeMeasures result;
  for (RunMode m : {RunMode::gated, RunMode::beside}) {
    // The worst over the production jobs; a job not yet measured in this mode leaves it unknown.
    for (const auto& [id, speeds] : speeds_) {
      const std::optional<ModeCost> cost = mode_cost(speeds[index(RunMode::paused)], speeds[index(m)]);
      std::optional<ModeCost>& worst = result.cost[index(m)];
      if (!cost) {
        worst.reset();
        break;
      }
      const double margin = settings_.noise_margin;  // the worst as mode_shares will read it
      if (!worst || cost->harm + margin * cost->error > worst->harm + margin * worst->error)
        worst = cost;
    }
    if (gains_[index(m)].size() >= kMinCostSamples) result.gain[index(m)] = moments(gains_[index(m)]).mean;
  }
  result.cost[index(RunMode::paused)] = ModeCost{};
  result.gain[index(RunMode::paused)] = 0.0;
  return result;
}

std::array<double, kRunModes> ConcurrencyBudget::shares() const {
  const ModeMeasures m = measures();
  return mode_shares(m, settings_, loss_debt(ran_, m, settings_));
}

RunMode ConcurrencyBudget::next_period(RunMode finished) {
  for (double& weight : ran_) weight *= 1 - 1 / kDebtMemory;
  ran_[index(finished)] += 1;
  const std::array<double, kRunModes> share = shares();
  size_t best = 0;
  for (size_t m = 0; m < kRunModes; ++m) {
    credit_[m] += share[m];
    if (credit_[m] > credit_[best]) best = m;
  }
  credit_[best] -= 1;
  return static_cast<RunMode>(best);
}

}  // namespace gpushare::policies
