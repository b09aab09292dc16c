// How the opportunistic jobs share production's busy time: measured, not guessed
// (docs/policies.md "The concurrency budget").
//
// Three ways to run an opportunistic job beside a busy production job, each with a cost to
// production and a gain to the opportunistic job that depend on the workloads and the GPU:
// - *paused*: nothing runs; production runs solo (the reference every cost is measured against);
// - *gated* (kernel-level idle gating): it runs only in production's gaps;
// - *beside*: it runs concurrently (on MPS with client priority 1, if the daemon provides it).
// On the H100 beside cost a gappy resnet50 b8 job nothing while the opportunistic job got 0.8 of
// its solo rate, where gating gave it 0.3-0.4; beside a saturating resnet50 b32 job, beside cost
// production 20 % and gating 25 % (mobilenet kernels in its gaps delay its next step). No rate law
// told these apart: production's progress per 200 ms carries ~10 % noise.
//
// The budget runs the experiment all the time: production's busy periods rotate between the
// three modes, each production job's speed on the GPU (kernels completed per second it had work
// in flight: throughput for a GPU-bound loop, latency per request for a server) is averaged per
// mode, and so is what the opportunistic jobs launched. A mode's cost is 1 - its mean speed over
// the paused one. A cost that, taken `noise_margin` standard errors low, fits the target over all
// the time the mode could get is charged that low value (a loss the measurements cannot tell from
// noise does not throttle: on the H100 beside a launch-bound resnet50 b8 job, a 6.5 % cost taken
// high held the opportunistic job to 0.28 of its solo rate where MPS client priority alone gave
// 0.86 with production at 1.06); any other cost is taken that many standard errors high. The
// shares then maximise the
// opportunistic gain with the production loss sum(share x cost) within 1 - target: the modes in
// order of gain per cost, each given what the remaining budget allows (a fractional knapsack),
// the reference keeping `reference_share`, and a mode that could still get time at least
// `explore_share`, so that its cost stays measured. The rest is paused.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>

namespace gpushare::policies {

enum class RunMode { paused, gated, beside };
inline constexpr size_t kRunModes = 3;

struct ConcurrencySettings {
  double target = 0.95;           // fraction of its solo speed each production job must keep
  double noise_margin = 1.0;      // standard errors a cost is taken low (fits) or high (does not)
  double reference_share = 0.05;  // paused at least this share (the reference stays current)
  double explore_share = 0.05;    // a mode that could get time is run at least this share
  size_t samples = 16;            // recent samples per mode (per production job; gains: per device)
};

// What running in a mode costs a production job, as a fraction of its solo speed (0.1: 10 %
// slower), with the standard error of that estimate.
struct ModeCost {
  double harm = 0;
  double error = 0;
};

// Each mode's cost (worst over the production jobs; none: not measured yet) and gain (the
// opportunistic jobs' launches per sample; none: not measured yet). Index: RunMode.
struct ModeMeasures {
  std::array<std::optional<ModeCost>, kRunModes> cost{};
  std::array<std::optional<double>, kRunModes> gain{};
};

// The share of production's busy time for each mode (sums to 1). Pure; see the header comment.
// Until a mode's cost and gain are measured it gets an equal share with the others. `debt`: the
// production loss already spent beyond what the target allows, to be paid back (reduces the
// budget).
std::array<double, kRunModes> mode_shares(const ModeMeasures& measures,
                                          const ConcurrencySettings& settings, double debt = 0);

// The recent periods' modes, each weighted by how long ago it ran (a period's weight decays by
// 1 / kDebtMemory per period), are what production has lost so far: sum(weight x cost, taken
// low by its noise: a loss that cannot be shown is not repaid) beyond (1 - target) x sum(weight) is the debt, paid back over kDebtHorizon
// periods; a loss below the target is not banked. Learning the costs
// (equal shares, on the H100 about 1.5 s of busy production) spent 4 % of a 6 s benchmark window
// beyond the target beside a saturating job; with the debt the periods after it repay it.
inline constexpr double kDebtMemory = 50;
inline constexpr double kDebtHorizon = 15;
double loss_debt(const std::array<double, kRunModes>& weights, const ModeMeasures& measures,
                 const ConcurrencySettings& settings);

// A mode's cost from recent speeds in it and in the paused mode: 1 - the ratio of their means.
// None until each has kMinCostSamples samples.
inline constexpr size_t kMinCostSamples = 3;
std::optional<ModeCost> mode_cost(const std::deque<double>& paused,
                                  const std::deque<double>& mode);

// kReplaceRun samples in a row this far from the mean of their mode (a fraction of the mean), on
// the same side, replace the samples before them: those describe a job that has changed. On the
// H100 a resnet50 job's first periods (start-up) ran at 1-5 % of its steady speed; kept, they read
// as a cost of 0.97. A lone sample that far off is left out: production's per-window speed spreads
// 15-20 % (S5 on the H100, 2026-11-25) and the first window of each of its busy phases is slower
// still; when one such sample replaced the rest, the mode's cost was unknown again, the shares
// fell back to equal thirds, and beside a gappy job that running beside cost nothing the
// opportunistic job was paused or gated most of the time.
inline constexpr double kReplaceDeviation = 0.5;
inline constexpr size_t kReplaceRun = 3;

class ConcurrencyBudget {
 public:
  explicit ConcurrencyBudget(ConcurrencySettings settings) : settings_(settings) {}

  // One sample of production job `job` in `mode`: `work` (kernels completed) over `busy_ns`
  // (time it had work on the GPU). A sample without work or busy time says nothing.
  void record_speed(uint64_t job, RunMode mode, double work, double busy_ns);
  // What the opportunistic jobs launched together over one sample's time in `mode`.
  void record_gain(RunMode mode, double launches);
  // Drops the production jobs not in `alive`.
  void retain(const std::set<uint64_t>& alive);

  ModeMeasures measures() const;
  std::array<double, kRunModes> shares() const;
  // The mode of the next period, after a period in `finished`: each mode's periods make up its
  // share, spread evenly (smooth weighted round robin).
  RunMode next_period(RunMode finished);

 private:
  using Samples = std::array<std::deque<double>, kRunModes>;
  void add(std::deque<double>& samples, double value) const;

  ConcurrencySettings settings_;
  std::map<uint64_t, Samples> speeds_;    // by production job
  std::map<uint64_t, Samples> outliers_;  // by production job: the run of far-off samples so far
  Samples gains_;
  std::array<double, kRunModes> credit_{};
  std::array<double, kRunModes> ran_{};  // periods run in each mode, decayed (loss_debt)
};

}  // namespace gpushare::policies
