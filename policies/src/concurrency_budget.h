// How much of production's busy time the opportunistic jobs may run beside it, measured, not
// guessed (docs/policies.md "Concurrency budget").
//
// Kernel-level idle gating protects production but gives the opportunistic jobs only its gaps;
// MPS client priority runs them beside production and, on the H100, left a gappy production job
// at its solo speed while the opportunistic job got 0.8-0.95 of its own (S1b, S5): there, gating
// throws most of the harvest away. Beside a saturating job MPS client priority cost production
// 18-38 % (S1a, S5-saturating, a transformer server), and there gating is what holds it. No rate
// law told the two apart: production's progress per 200 ms carries ~10 % noise, and the law read
// it as harm (S1b 0.11-0.42 harvested where MPS-prio took 0.95).
//
// The budget asks the question directly, as an experiment that runs all the time: production's
// busy periods alternate between *gated* ones (opportunistic work only in production's gaps: its
// reference speed) and *beside* ones (opportunistic work concurrent), and each production job's
// speed on the GPU is compared between the two. Speed is work per busy second (kernels completed
// per second that the job had work on the GPU): for a GPU-bound loop that is its throughput, for a
// server its latency per request. The comparison is between means of recent periods of each kind,
// so drift and per-period noise average out instead of triggering decisions.
//
// Running beside production for a share f of its busy time costs it f x harm, so the budget
// chooses f = (1 - target) / harm, with harm taken at `noise_margin` standard errors above its
// estimate (an uncertain estimate spends less), clamped to [min_share, max_share]: at least a few
// beside periods keep the measurement alive, at least a few gated ones keep the reference current.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>

namespace gpushare::policies {

struct ConcurrencySettings {
  double target = 0.95;       // fraction of its gated speed each production job must keep
  double noise_margin = 1.0;  // standard errors added to the harm before it is spent
  double min_share = 0.05;    // beside periods kept however costly (the measurement's)
  double max_share = 0.9;     // beside periods at most (the rest keep the reference current)
  double initial_share = 0.5; // before both kinds of period are measured
  size_t samples = 8;         // recent periods of each kind per production job
};

// What running beside a production job costs it, as a fraction of its gated speed: 0.1 means
// 10 % slower. `error`: the standard error of `harm`.
struct ConcurrencyCost {
  double harm = 0;
  double error = 0;
};

// The share of production's busy periods to run the opportunistic jobs beside it, given the
// worst measured cost (none: not measured yet). Pure; see the header comment.
double concurrency_share(const std::optional<ConcurrencyCost>& cost,
                         const ConcurrencySettings& settings);

// Periods of each kind a cost needs.
inline constexpr size_t kMinCostSamples = 3;
// A period this far from the mean of its kind (a fraction of the mean), either way, replaces the
// periods before it: they describe a job that has changed. On the H100 a resnet50 job's first
// periods (start-up) ran at 1-5 % of its steady speed; two of them, taken beside, read as a cost
// of 0.97 and held the share at its floor, so that no beside period came to correct it.
inline constexpr double kReplaceDeviation = 0.5;

// The cost from recent periods of each kind: their mean speeds' ratio. None until each kind has
// kMinCostSamples periods with a speed.
std::optional<ConcurrencyCost> concurrency_cost(const std::deque<double>& gated,
                                                const std::deque<double>& beside);

class ConcurrencyBudget {
 public:
  enum class Mode { gated, beside };

  explicit ConcurrencyBudget(ConcurrencySettings settings) : settings_(settings) {}

  // One measured period of production job `job` in `mode`: `work` (kernels completed) over
  // `busy_ns` (time it had work on the GPU). A period with no work or no busy time says nothing.
  void record(uint64_t job, Mode mode, double work, double busy_ns);
  // Drops the production jobs not in `alive`.
  void retain(const std::set<uint64_t>& alive);
  // The share in force: the smallest concurrency_share over the production jobs (a job not yet
  // measured in both kinds of period counts with the initial share).
  double share() const;
  // The cost behind share(), where measured.
  std::optional<ConcurrencyCost> deciding_cost() const;
  // The kind of the next period: beside periods make up share() of them, spread evenly.
  Mode next_period();

 private:
  struct Speeds {
    std::deque<double> gated, beside;  // work per busy second, newest last
  };
  ConcurrencySettings settings_;
  std::map<uint64_t, Speeds> jobs_;
  double credit_ = 0;  // beside periods owed
};

}  // namespace gpushare::policies
