#include "concurrency_budget.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "median.h"

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

// The loss the target allows production, less what it is owed already.
double allowance(const ConcurrencySettings& s, double debt) {
  return std::max(0.0, 1 - s.target - debt);
}

}  // namespace

bool given_the_doubt(const ModeCost& c, const ConcurrencySettings& s, double allowed) {
  // The benefit of the doubt is for a cost the noise cannot tell from one within the target,
  // not for a reading that says more: the cost and its standard error must each be within
  // twice what the target allows. On the H100 beside a saturating resnet50 b32 job (S5) the
  // first pairs of periods read beside's 15-24 % cost as 12 % +- 9 % (4 s phases; production
  // 0.82) and, with production's start-up measured, as 7 % +- 13 % (1 s phases; 0.77): taken
  // low each fitted and beside ran 90 % of production's busy time. Within 5 % of the target
  // allowance, not twice it, held a gappy job's costs (-15 % +- 9 %, its speed noisy from one
  // period to the next) rationed for most of the benchmark (opportunistic 0.34-0.38 of
  // MPS-prio's).
  const double doubt = 2 * (1 - s.target);
  return charged_low(c, s) * (1 - s.reference_share) <= allowed && c.harm <= doubt &&
         c.error <= doubt;
}

bool clearly_fits(const ModeCost& c, const ConcurrencySettings& s, double allowed) {
  return s.clear_margin > 0 && c.samples >= kClearPairs &&
         std::max(0.0, c.harm + s.clear_margin * c.error) * (1 - s.reference_share) <= allowed;
}

double charged_cost(const ModeCost& c, const ConcurrencySettings& s, double allowed) {
  return given_the_doubt(c, s, allowed) ? charged_low(c, s) : charged_high(c, s);
}

namespace {

// The modes that run the opportunistic jobs: the candidates for the time paused leaves.
constexpr std::array<RunMode, 2> kCandidates{RunMode::beside, RunMode::gated};
// The gated and beside shares of production's busy time, within `time` (1 - the reference share)
// and a loss of `budget`, each mode charged `cost` (index: RunMode) and gaining `gain_g`,
// `gain_b`, a `held` mode given nothing of the budget (only its exploring share); paused gets the
// rest. Pure.
std::array<double, kRunModes> plan_shares(const std::array<double, kRunModes>& cost, double gain_g,
                                          double gain_b, double budget, double time,
                                          const std::array<double, kRunModes>& explore_share,
                                          const std::array<bool, kRunModes>& held) {
  const size_t g = index(RunMode::gated), b = index(RunMode::beside);
  std::array<double, kRunModes> shares{};
  // The best point of a two-variable linear programme: maximise gain_g x f_g + gain_b x f_b
  // with f_g + f_b <= time and cost_g x f_g + cost_b x f_b <= budget. The optimum is a vertex:
  // each mode alone as far as time or budget allows, or both with time and budget used up. A
  // held mode stays at 0.
  auto alone = [&](size_t m) {
    return held[m] ? 0.0 : cost[m] > 0 ? std::min(time, budget / cost[m]) : time;
  };
  std::array<std::pair<double, double>, 4> vertices{{{0, 0}, {alone(g), 0}, {0, alone(b)}, {0, 0}}};
  if (!held[g] && !held[b] && cost[b] != cost[g]) {
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
  // Each candidate is run at least explore_share, so that what it costs and gains stays
  // measured (a cost that falls, a gain that rises: production's load or the opportunistic job
  // changed). Time left over means the budget limited the candidates: from that time.
  // Otherwise from the other candidate's: a mode given no time is never measured again, and one
  // wrong measurement (on the H100, a gain of 0 read while the opportunistic job was still
  // starting) would keep it out for good.
  // Except gated while beside takes all the time and gains more: gated is then dominated, and
  // exploring it only takes time from beside (on the H100 beside a gappy resnet50 b8 job, gated
  // gained 1-15 % of beside's launches at the same cost; its 5 % and the gated periods that
  // went on across production's gaps were part of what held the opportunistic job to 0.63-0.74
  // of MPS-prio's, where the target is 0.9). Its measurements stay; should beside's cost grow
  // past the budget, gated is explored again from the time beside loses.
  const bool gated_dominated = shares[b] >= time - 1e-9 && gain_b >= gain_g;
  for (RunMode m : kCandidates) {
    if (m == RunMode::gated && gated_dominated) continue;
    const double wanted = std::max(0.0, explore_share[index(m)] - shares[index(m)]);
    if (wanted <= 0) continue;
    const double from_left = std::min(left, wanted);
    left -= from_left;
    const size_t other = index(m == RunMode::beside ? RunMode::gated : RunMode::beside);
    const double from_other =
        std::min(wanted - from_left, std::max(0.0, shares[other] - explore_share[other]));
    shares[other] -= from_other;
    shares[index(m)] += from_left + from_other;
  }
  shares[index(RunMode::paused)] = 1 - shares[b] - shares[g];
  return shares;
}

// One pair's differences as the fit reads them: clipped to kMaxDifference and, robust, winsorized
// around their median ("Robust costs").
std::deque<double> fitted_differences(const std::deque<double>& raw, bool robust) {
  std::deque<double> values;
  for (double v : raw) values.push_back(std::clamp(v, -kMaxDifference, kMaxDifference));
  if (!robust || values.size() < kRobustSamples) return values;
  const double middle = median(values.begin(), values.end());
  std::deque<double> deviations;
  for (double v : values) deviations.push_back(std::abs(v - middle));
  const double spread =
      kRobustSpread * std::max(kRobustFloor, 1.4826 * median(deviations.begin(), deviations.end()));
  for (double& v : values) v = std::clamp(v, middle - spread, middle + spread);
  return values;
}

}  // namespace

std::array<std::optional<ModeCost>, kRunModes> mode_costs(const PairedDifferences& raw,
                                                          bool robust) {
  PairedDifferences differences;
  for (size_t p = 0; p < 3; ++p) differences[p] = fitted_differences(raw[p], robust);
  std::array<double, 3> n{}, mean{};
  double total = 0;
  for (size_t p = 0; p < 3; ++p) {
    if (differences[p].empty()) continue;
    n[p] = static_cast<double>(differences[p].size());
    for (double v : differences[p]) mean[p] += v;
    mean[p] /= n[p];
    total += n[p];
  }
  // The spread of the differences around what the effects predict for them (`fitted`: per pair),
  // with `parameters` degrees of freedom taken by the fit.
  auto variance = [&](const std::array<double, 3>& fitted, double parameters) {
    double squares = 0;
    for (size_t p = 0; p < 3; ++p)
      for (double v : differences[p]) {
        const double r = v - fitted[p];
        squares += r * r;
      }
    return total > parameters ? squares / (total - parameters) : 0;
  };
  // Weighted least squares of e_gated (g) and e_beside (b), paused at 0:
  //   n0 (g - m0)^2 + n1 (b - m1)^2 + n2 (b - g - m2)^2, at its minimum.
  const double a_gg = n[0] + n[2], a_bb = n[1] + n[2], a_gb = -n[2];
  const double det = a_gg * a_bb - a_gb * a_gb;
  std::array<std::optional<ModeCost>, kRunModes> costs{};
  // The direct pairs against paused (differences[0] or [1]) each read at least kClearCost.
  const double clear_effect = std::log(1 - kClearCost);
  // Robust, a difference at the clip is no such evidence: a stall, not a mode ("Robust costs").
  auto clear = [&](size_t pair) {
    const std::deque<double>& direct = raw[pair];
    return direct.size() >= kClearCostSamples &&
           std::all_of(direct.begin(), direct.end(), [&](double v) {
             return v <= clear_effect && !(robust && v <= -kMaxDifference);
           });
  };
  // The least cost a direct pair read (ModeCost::least_harm).
  auto least_harm = [&](size_t pair) {
    const std::deque<double>& direct = differences[pair];
    return direct.empty() ? 1.0 : 1 - std::exp(*std::max_element(direct.begin(), direct.end()));
  };
  auto cost = [&](double effect, double weight_inverse, double variance,
                  bool clearly) -> std::optional<ModeCost> {
    // weight_inverse: the effect's variance over one difference's (1 / n for n direct pairs).
    if (!clearly && weight_inverse * static_cast<double>(kMinCostSamples) > 1 + 1e-9)
      return std::nullopt;
    const double ratio = std::exp(effect);
    return ModeCost{.harm = 1 - ratio,
                    .error = ratio * std::sqrt(variance * weight_inverse),
                    .samples = 1 / weight_inverse};
  };
  if (n[2] == 0) {  // no gated period next to a beside one: each mode against paused alone
    const double spread = variance(mean, (n[0] > 0) + (n[1] > 0));
    if (n[0] > 0) costs[index(RunMode::gated)] = cost(mean[0], 1 / n[0], spread, clear(0));
    if (n[1] > 0) costs[index(RunMode::beside)] = cost(mean[1], 1 / n[1], spread, clear(1));
  } else {
    if (det <= 0) return costs;  // gated against beside only: neither against paused
    const double r_g = n[0] * mean[0] - n[2] * mean[2], r_b = n[1] * mean[1] + n[2] * mean[2];
    const double effect_g = (a_bb * r_g - a_gb * r_b) / det,
                 effect_b = (a_gg * r_b - a_gb * r_g) / det;
    const double spread = variance({effect_g, effect_b, effect_b - effect_g}, 2);
    costs[index(RunMode::gated)] = cost(effect_g, a_bb / det, spread, clear(kPairPausedGated));
    costs[index(RunMode::beside)] = cost(effect_b, a_gg / det, spread, clear(kPairPausedBeside));
  }
  if (costs[index(RunMode::gated)]) costs[index(RunMode::gated)]->least_harm = least_harm(0);
  if (costs[index(RunMode::beside)]) costs[index(RunMode::beside)]->least_harm = least_harm(1);
  return costs;
}

std::optional<ModeCost> job_cost(const std::optional<ModeCost>& in_flight,
                                 const std::optional<ModeCost>& throughput,
                                 const ConcurrencySettings& settings) {
  if (!settings.throughput_cost || !in_flight || !throughput) return in_flight;
  const double shown = charged_low(*throughput, settings);
  return shown > 1 - settings.target && shown > charged_low(*in_flight, settings) ? throughput
                                                                                  : in_flight;
}

bool queues_the_loss(const std::optional<ModeCost>& throughput, const ModeCost& in_flight,
                     const ConcurrencySettings& settings) {
  if (!throughput) return true;
  const double lost =
      std::max(0.0, throughput->harm - kLostWorkMargin * settings.noise_margin * throughput->error);
  return lost < kQueuedShare * charged_low(in_flight, settings);
}

double sojourn_factor(double busy, double cost) {
  busy = std::clamp(busy, 0.0, 1.0);
  const double left = 1 - busy - std::max(0.0, cost);
  if (!(left > 0)) return std::numeric_limits<double>::infinity();
  return (1 - busy) / left;
}

bool stretches_requests(double busy, double cost, const ConcurrencySettings& settings) {
  return settings.tail_factor > 0 && sojourn_factor(busy, cost) > settings.tail_factor;
}

double p99_factor(double share, double stretch) {
  share = std::clamp(share, 0.0, 1.0);
  const double p99 = std::log(100.0);
  if (!(stretch < std::numeric_limits<double>::infinity()))  // those requests never finish
    return share < 0.01 ? std::log((1 - share) / (0.01 - share)) / p99
                        : std::numeric_limits<double>::infinity();
  stretch = std::max(1.0, stretch);
  auto above = [&](double x) {  // the share of requests taking longer than x
    return (1 - share) * std::exp(-x) + share * std::exp(-x / stretch);
  };
  double low = p99, high = p99 * stretch;  // the answers for a share of 0 and of 1
  for (int i = 0; i < 60; ++i) {
    const double middle = (low + high) / 2;
    (above(middle) > 0.01 ? low : high) = middle;
  }
  return high / p99;
}

bool brief_exposure(const std::optional<double>& busy, const ConcurrencySettings& settings,
                    const std::optional<double>& cost) {
  if (!(settings.tail_factor > 0) || (busy && *busy >= settings.gaps_limit)) return false;
  if (!cost) return true;
  return busy ? stretches_requests(*busy, *cost, settings) : *cost >= kClearCost;
}

double learning_share(double period_share, double reference_length) {
  const double paused = period_share * reference_length;
  return paused > 0 ? paused / (paused + 1 - period_share) : 0;
}

double loss_debt(const std::array<double, kRunModes>& weights, const ModeMeasures& measures,
                 const ConcurrencySettings& settings) {
  double total = 0, lost = 0;
  for (size_t m = 0; m < kRunModes; ++m) {
    // A mode whose cost is not known yet is left out (gated, before it is needed; beside, while
    // learning: then nothing is known and there is no debt).
    if (!measures.cost[m]) continue;
    const ModeCost& cost = *measures.cost[m];
    total += weights[m];
    lost += weights[m] * charged_low(cost, settings);
  }
  // Only a loss beyond the target is carried: a budget left unspent is not banked for later.
  return std::max(0.0, lost - (1 - settings.target) * total) / kDebtHorizon;
}

// A share this small is none (the shares' rounding).
constexpr double kNoShare = 1e-9;

namespace {

// Whether every candidate the plan gives time reads clearly within the target (clearly_fits).
bool all_clear(const ModeMeasures& m, const std::array<double, kRunModes>& share,
               const ConcurrencySettings& settings, double allowed) {
  for (RunMode c : kCandidates) {
    const std::optional<ModeCost>& cost = m.cost[index(c)];
    if (share[index(c)] > kNoShare && !(cost && clearly_fits(*cost, settings, allowed)))
      return false;
  }
  return true;
}

}  // namespace

bool reference_kept(const std::array<double, kRunModes>& ran, double paused_share, bool clear,
                    const ConcurrencySettings& settings) {
  double total = 0;
  for (double weight : ran) total += weight;
  const double paused = ran[index(RunMode::paused)];
  return clear && paused_share <= settings.reference_share + kNoShare && total > 0 &&
         paused > settings.reference_share * total;
}

std::array<double, kRunModes> mode_shares(const ModeMeasures& measures,
                                          const ConcurrencySettings& settings, double debt) {
  const size_t p = index(RunMode::paused), g = index(RunMode::gated), b = index(RunMode::beside);
  if (!measures.cost[b] || !measures.gain[b]) {
    // Still learning what running beside costs: half of the periods each, paused and beside
    // alternating, so that every period after the first is a pair (kLearningReference; in time,
    // learning_share: paused 0.4 of it with paused periods two thirds as long).
    std::array<double, kRunModes> learning{};
    learning[p] = learning_share(kLearningReference, settings.reference_length);
    learning[b] = 1 - learning[p];
    return learning;
  }
  // Gated is learnt only once it is needed: while beside's cost fits the target over all of
  // production's time, gated would only take time from it.
  const bool gated_known = measures.cost[g] && measures.gain[g];
  // What the target allows, less what exploring the candidates will spend if the budget, not the
  // time, ends up limiting them. A candidate whose cost, taken low by its noise, fits the budget
  // over all the time it could get is charged that: a loss the measurements cannot tell from
  // nothing does not throttle. Any other is charged its cost taken high: where throttling is
  // shown to be needed, it errs toward production.
  const double allowed = allowance(settings, debt);
  // While production is owed a loss, a candidate is run for its measurement only as far as the
  // budget allows it anyway (what exploring would spend is still set aside, so that the debt ends
  // as soon as without this rule): exploring it at a cost would add to the debt it repays. On
  // the H100 (S5, transformer_infer_b8 1 s on and off, 2026-11-26 call 30) the learning of
  // beside's 36 % cost took 13 windows of the benchmark's 63 busy ones, and the exploring share's
  // beside period (4 windows) in the next busy phase cost production as much again as a third
  // learning period; production kept 0.905.
  const double explore = debt > 0 ? 0 : settings.explore_share;
  std::array<double, kRunModes> cost{};
  std::array<double, kRunModes> learning{};  // the reference share each mode's reading asks for
  std::array<double, kRunModes> recheck{};   // the least share a contested reading asks for
  // The least share each candidate is explored at, and whether the plan holds it: a mode that
  // would stretch a server's requests beyond tail_factor ("A server's tail") is explored at
  // kTailExploreShare and gets nothing of the allowance.
  std::array<double, kRunModes> explores{explore, explore, explore};
  std::array<bool, kRunModes> held{};
  const bool gaps =
      settings.tail_factor > 0 && measures.busy && *measures.busy < settings.gaps_limit;
  double budget = allowed;
  for (RunMode m : kCandidates) {
    if (!measures.cost[index(m)]) continue;  // gated, not yet needed
    const ModeCost& c = *measures.cost[index(m)];
    const double low = charged_low(c, settings), high = charged_high(c, settings);
    const bool doubtful = given_the_doubt(c, settings, allowed);
    cost[index(m)] = doubtful ? low : high;  // charged_cost, the doubt evaluated once
    // Read at its estimate, not given the doubt: a server's p99 pays for a mode read too cheap
    // far more than the mean does (on the H100, call 80, beside read 0.095 +- 0.072, given the
    // doubt ran 0.84 of a transformer server's busy time, and that repetition's p99 was 2.8 times
    // isolated's where the others' were 1.2-1.5).
    if (gaps && measures.queues[index(m)] && stretches_requests(*measures.busy, c.harm, settings)) {
      explores[index(m)] = std::min(explore, kTailExploreShare);
      held[index(m)] = true;
      budget -= explores[index(m)] * cost[index(m)];
      // A reading its noise cannot tell from one that fits the tail is rechecked where the
      // server's p99 can bear it (kTailRecheckShare), what that costs set aside as for exploring;
      // else the mode barely runs, and its reading asks for no reference share.
      if (!stretches_requests(*measures.busy, low, settings) &&
          p99_factor(kTailRecheckShare, sojourn_factor(*measures.busy, high)) <=
              settings.tail_factor) {
        recheck[index(m)] = kTailRecheckShare;
        budget -= (kTailRecheckShare - explores[index(m)]) * cost[index(m)];
      }
      continue;
    }
    budget -= settings.explore_share * cost[index(m)];
    // A cost given the doubt on fewer than doubt_samples pairs of periods is measured again the
    // sooner: its error is itself a guess from few pairs. On the H100 beside a saturating
    // resnet50 b32 job (S5, 1 s on and off) the first three pairs read beside's 25 % cost as 5 %
    // +- 6 %; given the doubt, beside ran 95 % of production's busy time, paused periods (the
    // pairs that could correct it) came once in 20 periods, about once a minute with the
    // on-phases' breaks, and production kept 0.774. The reference share is raised in proportion
    // to the pairs still missing (from kLearningReference), so such a reading is corrected within
    // a few seconds of busy production, while a gappy job's reading near 0 costs the
    // opportunistic job that share for as long.
    const double few_pairs_share = learning_share(
        kLearningReference * (1 - c.samples / settings.doubt_samples), settings.reference_length);
    // A reading that fits even taken clear_margin errors high does not rest on the doubt.
    if (doubtful && c.samples < settings.doubt_samples && !clearly_fits(c, settings, allowed))
      learning[index(m)] = few_pairs_share;
    // Robust costs: a cost held against the mode on as few pairs, where a direct pair read it
    // within the allowance, is rechecked at the same share, from paused's time, debt or not.
    if (settings.robust_costs && !doubtful && c.samples < settings.doubt_samples &&
        c.least_harm <= 1 - settings.target)
      recheck[index(m)] = few_pairs_share;
  }
  budget = std::max(0.0, budget);
  const double gain_b = std::max(0.0, *measures.gain[b]);
  const double gain_g = gated_known ? std::max(0.0, *measures.gain[g]) : 0.0;

  // The reference share the uncertain readings ask for, then again without the modes that end
  // up with no more than their exploring share: a mode that barely runs cannot take production
  // far whatever its cost. On the H100 beside a gappy resnet50 b8 job gated, dominated by beside
  // and not run, kept its early reading's few pairs for good, and its raised reference share
  // held beside at 0.69-0.85 of production's busy time for a whole benchmark.
  double reference = settings.reference_share;
  for (double r : learning) reference = std::max(reference, r);
  std::array<double, kRunModes> shares =
      plan_shares(cost, gain_g, gain_b, budget, 1 - reference, explores, held);
  double relied_on = settings.reference_share;
  for (RunMode m : kCandidates)
    if (shares[index(m)] > explore + 1e-9) relied_on = std::max(relied_on, learning[index(m)]);
  if (relied_on < reference)
    shares = plan_shares(cost, gain_g, gain_b, budget, 1 - relied_on, explores, held);
  // A reading rechecked takes its share from paused's time beyond the reference share, then from
  // the other candidate's beyond what that one is explored or rechecked at: beside a server,
  // gated, cheap, takes all the time the allowance gives, and a held beside would otherwise wait
  // for it to give some up.
  for (RunMode m : kCandidates) {
    const size_t other = index(m == RunMode::beside ? RunMode::gated : RunMode::beside);
    double wanted = std::max(0.0, recheck[index(m)] - shares[index(m)]);
    for (const auto& [from, kept] : {std::pair{p, settings.reference_share},
                                     std::pair{other, std::max(explores[other], recheck[other])}}) {
      const double taken = std::min(wanted, std::max(0.0, shares[from] - kept));
      shares[from] -= taken;
      shares[index(m)] += taken;
      wanted -= taken;
    }
  }
  if (gated_known) return shares;
  // Gated not yet measured: beside as far as it fits. Where that leaves production paused
  // (beside's cost is above the target) and production leaves gaps, gated may harvest the time
  // beside cannot have, so it is learnt, at a quarter of the time beside leaves: in a model of a
  // saturating job (both modes costing 20-25 %, 6 s of busy production, the warm-up run beside)
  // production kept 0.903 with a quarter, 0.901 with half; a server that gating costs 2 % kept the
  // same harvest (0.42-0.43 of 0.9).
  shares[g] = 0;
  const bool no_gaps = measures.busy && *measures.busy >= settings.gaps_limit;
  if (shares[b] >= 1 - relied_on - 1e-9 || no_gaps) {
    shares[p] = 1 - shares[b];
    return shares;
  }
  shares[g] = (1 - shares[b]) / 4;
  shares[p] = 1 - shares[b] - shares[g];
  return shares;
}

template <typename T>
void ConcurrencyBudget::add(std::deque<T>& samples, T value) const {
  samples.push_back(value);
  while (samples.size() > settings_.samples) samples.pop_front();
}

bool ConcurrencyBudget::record_speed(uint64_t job, RunMode mode, double work, double busy_ns,
                                     double window_ns) {
  if (!(work > 0) || !(busy_ns > 0)) return false;
  Period& period = series_[job].current;
  if (period.mode != mode) period = Period{.mode = mode};  // a period is of one mode
  period.work += work;
  period.busy_s += busy_ns / 1e9;
  period.window_s += std::max(window_ns, busy_ns) / 1e9;
  return true;
}

void ConcurrencyBudget::record_gain(RunMode mode, double launches) {
  if (launches >= 0) add(gains_[index(mode)], launches);
}

bool loop_left(const std::optional<double>& paused, const std::optional<double>& running,
               const ConcurrencySettings& settings) {
  return paused && running && *paused >= settings.gaps_limit &&
         *running < settings.gaps_limit - kLoopLeftMargin;
}

void ConcurrencyBudget::record_busy(RunMode mode, double share, bool working) {
  if (!(share >= 0)) return;
  share = std::min(share, 1.0);
  if (mode == RunMode::paused) {
    add(paused_busy_, share);
    return;
  }
  if (!working) return;
  add(running_busy_, share);
  const std::optional<double> running =
      running_busy_.size() >= settings_.samples
          ? std::optional<double>(median(running_busy_.begin(), running_busy_.end()))
          : std::nullopt;
  if (loop_left(paused_busy(), running, settings_)) relearn();
}

void ConcurrencyBudget::relearn() {
  series_.clear();
  for (auto& gains : gains_) gains.clear();
  paused_busy_.clear();
  running_busy_.clear();
  ++relearnt_;
}

bool speed_jumped(const std::deque<PeriodSpeeds>& paused, const PeriodSpeeds& period) {
  if (paused.size() < kJumpPeriods) return false;
  auto median_of = [&](double PeriodSpeeds::*speed) {
    std::deque<double> values;
    for (const PeriodSpeeds& p : paused) values.push_back(p.*speed);
    return median(values.begin(), values.end());
  };
  return period.in_flight > median_of(&PeriodSpeeds::in_flight) + kMaxDifference &&
         period.throughput > median_of(&PeriodSpeeds::throughput) + kJumpWork;
}

bool still_climbing(const std::deque<double>& log_speeds) {
  if (log_speeds.size() < 2 * kSettleWindows) return false;
  const auto last = log_speeds.end() - kSettleWindows;
  const auto before = last - kSettleWindows;
  return median(last, log_speeds.end()) > median(before, last) + kSettleRise;
}

void ConcurrencyBudget::retain(const std::set<uint64_t>& alive) {
  // The in-flight readings were of the jobs there were: a server that replaces a loop (or a loop
  // a server) is read afresh, not through the median of its predecessor's windows.
  if (std::erase_if(series_, [&](const auto& entry) { return !alive.count(entry.first); }) > 0) {
    paused_busy_.clear();
    running_busy_.clear();
  }
}

void ConcurrencyBudget::break_sequence() {
  for (auto& [id, series] : series_) {
    series.current = Period{};
    series.last.reset();
  }
}

bool ConcurrencyBudget::close_period(Series& series, RunMode finished) {
  const Period period = std::exchange(series.current, Period{});
  if (period.mode != finished || !(period.work > 0) || !(period.busy_s > 0)) {
    series.last.reset();  // a period not measured: the next one has no neighbour
    return false;
  }
  const PeriodSpeeds speeds{.in_flight = std::log(period.work / period.busy_s),
                            .throughput = std::log(period.work / period.window_s)};
  if (finished == RunMode::paused) {
    if (speed_jumped(series.paused_speeds, speeds)) return true;
    add(series.paused_speeds, speeds);
  }
  if (series.last && series.last->first != finished) {
    const auto [earlier, earlier_speeds] = *series.last;
    const bool ordered = index(earlier) < index(finished);
    const size_t low = index(ordered ? earlier : finished),
                 high = index(ordered ? finished : earlier);
    const size_t pair = low + high - 1;  // (0,1), (0,2), (1,2): 0, 1, 2
    auto difference = [&](double later, double before) {
      return ordered ? later - before : before - later;
    };
    add(series.differences[pair], difference(speeds.in_flight, earlier_speeds.in_flight));
    add(series.throughput_differences[pair],
        difference(speeds.throughput, earlier_speeds.throughput));
  }
  series.last = {finished, speeds};
  return false;
}

ModeMeasures ConcurrencyBudget::measures() const {
  ModeMeasures result;
  std::array<bool, kRunModes> unknown{};
  for (const auto& [id, series] : series_) {
    const std::array<std::optional<ModeCost>, kRunModes> in_flight =
        mode_costs(series.differences, settings_.robust_costs);
    const std::array<std::optional<ModeCost>, kRunModes> work =
        mode_costs(series.throughput_differences, settings_.robust_costs);
    for (RunMode m : {RunMode::gated, RunMode::beside}) {
      // The worst over the production jobs; a job not yet measured in this mode leaves it unknown.
      const std::optional<ModeCost> cost =
          job_cost(in_flight[index(m)], settings_.throughput_cost ? work[index(m)] : std::nullopt,
                   settings_);
      std::optional<ModeCost>& worst = result.cost[index(m)];
      if (!cost) unknown[index(m)] = true;
      if (unknown[index(m)]) {
        worst.reset();
        continue;
      }
      const double margin = settings_.noise_margin;  // the worst as mode_shares will read it
      if (!worst || cost->harm + margin * cost->error > worst->harm + margin * worst->error) {
        worst = cost;
        result.queues[index(m)] = queues_the_loss(work[index(m)], *in_flight[index(m)], settings_);
      }
    }
  }
  for (RunMode m : {RunMode::gated, RunMode::beside})
    if (gains_[index(m)].size() >= kMinCostSamples)
      result.gain[index(m)] = moments(gains_[index(m)]).mean;
  result.busy = paused_busy();
  result.cost[index(RunMode::paused)] = ModeCost{};
  result.gain[index(RunMode::paused)] = 0.0;
  return result;
}

std::array<double, kRunModes> ConcurrencyBudget::shares() const {
  const ModeMeasures m = measures();
  return mode_shares(m, settings_, loss_debt(ran_, m, settings_));
}

bool ConcurrencyBudget::fits_target(RunMode mode) const {
  if (mode == RunMode::paused) return true;
  const ModeMeasures m = measures();
  if (!m.cost[index(mode)]) return false;
  const double allowed = allowance(settings_, loss_debt(ran_, m, settings_));
  return charged_cost(*m.cost[index(mode)], settings_, allowed) <= allowed;
}

bool ConcurrencyBudget::learning() const {
  const std::optional<ModeCost> beside = measures().cost[index(RunMode::beside)];
  return !beside || beside->samples < settings_.doubt_samples;
}

RunMode ConcurrencyBudget::next_period(RunMode finished, double length, bool demand) {
  length = std::max(0.0, length);
  bool jumped = false;
  for (auto& [id, series] : series_) jumped = close_period(series, finished) || jumped;
  if (jumped) relearn();
  for (double& weight : ran_) weight *= std::pow(1 - 1 / kDebtMemory, length);
  if (demand) ran_[index(finished)] += length;
  const ModeMeasures m = measures();
  const double debt = loss_debt(ran_, m, settings_);
  const std::array<double, kRunModes> share = mode_shares(m, settings_, debt);
  // The finished period is charged its length, and each mode credited its share of it; the
  // next is the mode furthest behind its share (ties, within rounding: the first, paused).
  credit_[index(finished)] -= length;
  // Where the finished mode may not run again, the next is the one furthest behind its share
  // among those that have one (paused, which may be ahead of its share, where none other has).
  const bool again = !brief(finished, m);
  size_t best = 0;
  for (size_t m = 0; m < kRunModes; ++m) {
    credit_[m] += share[m] * length;
    if (!again && (m == index(finished) || !(share[m] > 0))) continue;
    if (credit_[m] > credit_[best] + 1e-9) best = m;
  }
  if (!again) credit_[index(finished)] = std::min(credit_[index(finished)], 1.0);
  // A paused period due only for the reference share waits while the recent periods kept it
  // (reference_kept): the candidate the plan gives the most time takes its place in the rotation
  // (their credits swap, so that none of the others falls behind a mode given no share, and
  // paused comes once, not in a row, when the recent periods no longer keep it). Not the one
  // furthest behind its share: a mode held to its exploring share (a server's tail) would run
  // in every such place.
  const size_t p = index(RunMode::paused);
  if (best == p &&
      reference_kept(ran_, share[p], all_clear(m, share, settings_, allowance(settings_, debt)),
                     settings_)) {
    std::optional<size_t> other;
    for (RunMode c : kCandidates) {
      const size_t k = index(c);
      if (!(share[k] > kNoShare) || (!again && k == index(finished))) continue;
      if (!other || share[k] > share[*other]) other = k;
    }
    if (other) {
      std::swap(credit_[p], credit_[*other]);
      best = *other;
    }
  }
  return static_cast<RunMode>(best);
}

std::optional<double> ConcurrencyBudget::paused_busy() const {
  if (paused_busy_.size() < kMinCostSamples) return std::nullopt;
  return median(paused_busy_.begin(), paused_busy_.end());
}

bool ConcurrencyBudget::brief(RunMode mode) const {
  return brief(mode, measures());
}

bool ConcurrencyBudget::brief(RunMode mode, const ModeMeasures& m) const {
  if (mode == RunMode::paused) return false;
  // Until the median rests on kMinCostSamples paused windows, the latest: one paused window tells
  // a server (in flight about half of it) from a loop that keeps the GPU busy, and spares such a
  // loop's first pairs the noise of one window a side.
  std::optional<double> busy = paused_busy();
  if (!busy && !paused_busy_.empty()) busy = paused_busy_.back();
  const std::optional<ModeCost>& cost = m.cost[index(mode)];
  return brief_exposure(busy, settings_, cost ? std::optional<double>(cost->harm) : std::nullopt);
}

RunMode ConcurrencyBudget::resume_mode(RunMode current) const {
  if (current != RunMode::paused) return current;
  const std::array<double, kRunModes> share = shares();
  std::optional<size_t> best;
  for (RunMode m : kCandidates)
    if (share[index(m)] > 0 && credit_[index(m)] > 0 &&
        (!best || credit_[index(m)] > credit_[*best] + 1e-9))
      best = index(m);
  return best ? static_cast<RunMode>(*best) : current;
}

}  // namespace gpushare::policies
