// `harvest`: give the opportunistic jobs everything production does not measurably miss
// (docs/policies.md "harvest"). The installed default.
//
// Why: `tgs` starts an opportunistic job from a small launch rate and grows it while production
// keeps its target, so the noise of its signal decides how much is harvested; on the H100 it
// harvested 0.22-0.58 of a gappy production job's leftovers where plain MPS client priority took
// 0.8-0.96 for free. `harvest` inverts the default: opportunistic work runs unthrottled (on MPS with
// client priority 1 where the daemon provides it, so its kernels fill production's gaps at kernel
// granularity) and is throttled only when production's measured progress falls below `target` of
// its solo rate by more than the measured noise.
//
// Signal: production's kernels completed per control period (completion marks of its shim; its
// launches where it publishes none), smoothed, with its period-to-period noise (tgs_estimator.h).
// Solo rate: the median of short probes (opportunistic work paused for one window to drain, then
// one period measured): at production's arrival, then every `probe_interval_ms` of busy production
// time, 5 % of the opportunistic job's time at the defaults. Never a long profiling pause.
// Actuator: the opportunistic class's launches per second, unlimited until the first measured
// shortfall, then AIMD: a shortfall within `tolerance` + noise cuts the limit in proportion, a
// large one halves it, headroom adds `increase` of the unthrottled rate per period; a limit the
// class no longer uses while production keeps its target returns to unlimited.
// Yield: every production job idle for `idle_windows` windows: unlimited; production back: the
// limit in force before the idle phase applies from the very next window.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "catalog.h"
#include "class_sharing.h"
#include "concurrency_budget.h"
#include "queue_bound.h"
#include "share.h"
#include "tgs_estimator.h"

namespace gpushare::policies {
namespace {

using tgs::EstimatorSettings;
using tgs::ProductionJob;

const ParameterSpec kParameters[] = {
    {"target", 0.95, 0.5, 1.0, "fraction of its solo rate each production job must keep"},
    {"tolerance", 0.02, 0.005, 0.2,
     "shortfall below the target (beyond the noise) that earns the full proportional decrease"},
    {"halve_deviation", 0.1, 0.02, 0.5,
     "shortfall (beyond the noise) at which the limit is halved instead"},
    {"decrease", 0.25, 0.01, 0.9, "largest proportional decrease of the limit per period"},
    {"increase", 0.05, 0.001, 0.5,
     "increase of the limit per period with production at or above target, as a fraction of the "
     "opportunistic class's unthrottled rate"},
    {"control_period_ms", 200, 10, 10'000,
     "busy production time over which rates are measured and the limit moves once"},
    {"learning_period_ms", 150, 10, 10'000,
     "with concurrency: the control period while the cost of running beside production rests on "
     "fewer than doubt_samples pairs of periods (learning): shorter periods make those pairs "
     "sooner, for less of production's time paused or slowed"},
    {"reference_period_ms", 100, 10, 10'000,
     "with concurrency: the length of a paused period (production's solo reference), its settling "
     "window included; it ends after one measured window at least. Shorter than the other "
     "periods, so that each pair of periods pauses the opportunistic jobs for less of "
     "production's time"},
    {"smoothing", 0.5, 0.05, 1.0, "weight of a new period in each production job's rate estimate"},
    {"noise_margin", 1.0, 0, 10,
     "standard errors of the rate estimate that a shortfall must exceed before it counts"},
    {"probe_interval_ms", 5000, 0, 600'000,
     "busy production time between probes of its solo rate (opportunistic work paused for one "
     "window plus one period); 0 probes only when a production job arrives"},
    {"solo_samples", 5, 1, 32, "recent probes whose median is each production job's solo rate",
     true},
    {"idle_windows", 3, 1, 100,
     "windows with every production job idle before opportunistic work runs unlimited", true},
    {"idle_release", 1, 0, 1,
     "with concurrency: 1: a window in which every production job was idle releases the "
     "opportunistic jobs the budget holds paused at once, idle-gated (held the moment production "
     "launches again) with the in_flight bound, before idle_windows declare production idle; 0: "
     "they wait for idle_windows",
     true},
    {"in_flight", 0, 0, 1024, "kernels each opportunistic job may have in flight; 0 is no bound",
     true},
    {"kernel_gating", 0, 0, 1,
     "1: while production leaves gaps, opportunistic launches wait whenever production has work in "
     "flight (kernel-level idle gating; pair it with an in_flight bound so production meets a "
     "short queue); while it leaves none, the rate law instead",
     true, Needs::kernel_idle_gating},
    {"gating_busy_limit", 0.9, 0.1, 1.0,
     "production busy this fraction of the time leaves no gaps worth gating for: with "
     "kernel_gating the opportunistic jobs run beside it under the rate law; with concurrency "
     "gated is not learnt"},
    {"gating_retry_ms", 5000, 200, 600'000,
     "with kernel_gating: how long the rate law runs before production's gaps are measured again"},
    {"concurrency", 0, 0, 2,
     "1: no rate law; production's busy control periods rotate between paused (its solo "
     "reference), gated (as kernel_gating) and beside (opportunistic jobs concurrent), and each "
     "mode gets the share of production's time that its measured cost to production and gain to "
     "the opportunistic jobs earn within the target (the concurrency budget); 2: as 1 on a device "
     "whose opportunistic jobs are all clients of gpushared's MPS (beside then means beside at "
     "client priority 1), else as 0",
     true, Needs::kernel_idle_gating},
    {"reference_share", 0.05, 0.01, 0.5,
     "with concurrency: the least share of production's busy periods with opportunistic work "
     "paused, which keeps its solo speed (every cost's reference) current"},
    {"queue_ms", 8, 0, 1000,
     "with concurrency: while production runs beside the opportunistic jobs, each of them may "
     "keep about this much of its own work queued on the GPU (in kernels, at the rate it launched "
     "there recently), so that production, paused, meets a short queue (loop_queue_ms where "
     "production is a loop); also the least of the bound while production idles "
     "(idle_queue_ms); 0: no bound beside production"},
    {"loop_queue_ms", 16, 0, 1000,
     "with concurrency: queue_ms where production keeps the GPU busy (its paused windows in "
     "flight at least gating_busy_limit of the time: a loop, which meets the queue only behind its "
     "own kernels and as a paused period begins); 0: no bound there"},
    {"idle_queue_ms", 16, 0, 1000,
     "with kernel_gating or concurrency: the most each opportunistic job may keep queued while "
     "every production job idles (after idle_windows), so that production, back, meets a short "
     "queue: 1/32 of production's typical busy phase (it meets the queue once per phase), at "
     "least queue_ms (also until a phase is known); 0: no bound there"},
    {"doubt_samples", 8, 3, 16,
     "with concurrency: pairs of adjacent periods a cost taken low (the benefit of the doubt) must "
     "rest on before production's paused share falls to reference_share; with fewer it is raised "
     "in proportion to the pairs missing (every other period with none), so that an early "
     "reading is measured again within seconds",
     true},
    {"clear_margin", 2, 0, 10,
     "with concurrency: a cost taken low on fewer than doubt_samples pairs (but 4 at least) that "
     "fits the target even taken this many standard errors high does not raise production's "
     "paused share (it does not rest on the doubt), and where every mode that runs reads that "
     "clearly, the paused periods that learnt the costs count toward reference_share; 0: "
     "neither"},
    {"cost_samples", 16, 16, 256,
     "with concurrency: differences between adjacent periods kept per pair of modes and "
     "production job (and gains per mode): the memory every cost is measured over; more is "
     "steadier and slower to follow a change of production's load",
     true},
    {"throughput_cost", 0, 0, 1,
     "with concurrency: 1: a mode's cost to a production job is its cost in throughput (kernels "
     "per window of the job's busy time) where that, taken low by its noise, is above the "
     "target's allowance and above its cost in speed in flight (kernels per ms in flight): a loss "
     "on the CPU side between a launch-bound job's kernels, which the speed in flight misses; 0: "
     "the speed in flight alone",
     true},
    {"robust_costs", 0, 0, 1,
     "with concurrency: 1: each pair of modes' differences between adjacent periods are taken at "
     "most 3 robust standard deviations from their median (a stalled period weighs as an ordinary "
     "bad one), and a cost held against a mode on fewer than doubt_samples pairs, one of which "
     "read it within the target's allowance, is rechecked at the share the doubt would pause; 0: "
     "the mean of the differences clipped at a factor of e",
     true},
    {"tail_factor", 1.2, 0, 100,
     "with concurrency: where production is a server (in flight less than gating_busy_limit of "
     "its paused windows, and doing the same work in every mode: a mode's loss becomes "
     "queueing), no mode that would stretch its requests' time by more than this factor (a "
     "queue's time at its measured utilisation and the mode's estimated cost) runs more than "
     "0.5 % of its busy time, whatever the budget allows: its p99 follows the requests that meet "
     "such a mode; 0: no such bound"},
    {"warm_up_ms", 750, 0, 600'000,
     "with concurrency: a production job's first this much busy time (windows in which it made "
     "progress) is not measured and the opportunistic jobs wait meanwhile (start-up speeds would "
     "bias the budget's costs), and beyond it, up to twice as long, while the job's speed in "
     "flight still climbs (the median of its last three windows more than e^0.5 above the three "
     "before); 0: none"},
};

// The `concurrency` value that runs the budget only where the opportunistic jobs are MPS clients.
constexpr int kConcurrencyWhereMps = 2;

// A duration in whole windows of `window_ns` (the current one).
double in_windows(uint64_t ns, uint64_t window_ns) {
  return window_ns > 0 ? std::round(static_cast<double>(ns) / static_cast<double>(window_ns)) : 0;
}
// A period's length in whole windows: one at least.
double period_windows(uint64_t length, uint64_t window_ns) {
  return std::max(1.0, in_windows(length, window_ns));
}
// Whether a period of `elapsed` has reached `length`, counted in whole windows: the daemon's
// windows run some tens of microseconds either side of its tick (on the H100, 2026-11-27, calls
// 63-64: standard deviation 61 us), and three in a row fell short of 150 ms 64 % of the time:
// two periods in three ran a window longer than their length.
bool reached(uint64_t elapsed, uint64_t length, uint64_t window_ns) {
  return in_windows(elapsed, window_ns) >= period_windows(length, window_ns);
}
// Periods in a row at or above target with the limit unused before the limit is lifted.
constexpr int kLiftPeriods = 5;
// A limit this many times what the class used in a period is not holding it back.
constexpr double kUnusedFactor = 1.5;
// The lowest limit, as a fraction of the unthrottled rate: enough for the law to keep seeing the
// effect of its limit (one resnet50 step every few seconds), at most 1 % of production's time.
constexpr double kFloorFraction = 0.01;
// A probe this far from the solo rate (a fraction of it), either way, replaces the probes before
// it. Probes of 200 ms vary by ±10 % on the H100 (S1b); a start-up sample was 96 % low.
constexpr double kReplaceDeviation = 0.25;
// Until a production job's solo rate rests on this many probes, probe every second of busy
// production time instead of every probe_interval_ms: a job that just started (or changed) has
// not reached its steady rate, and a solo rate taken then misleads the law for a whole interval.
constexpr size_t kYoungSamples = 3;
constexpr uint64_t kYoungProbeIntervalNs = 1'000'000'000;
// Growth allowed to an opportunistic job that left part of its share unused (the `fair` default).
constexpr double kSharingHeadroom = 0.05;
// With concurrency: a mode (gated, beside) the budget limits is still run this share of
// production's busy time, so that its cost stays measured (it spends at most 0.05 x the cost).
constexpr double kExploreShare = 0.05;
// With concurrency, windows not measured after production returns from idle, beyond the first
// (which is mixed): its ramp-up. On the H100 (S5, resnet50 b32 4 s on / 4 s off, MPS-prio) the
// first windows of an on-phase were far slower in every mode; one that landed in a paused period
// became the reference, beside then read as free and ran 62 % of production's busy time while it
// cost 17 % (26.0 against 31.3 kernels per ms): production 0.871.
// Only after an idle phase this long (windows): the GPU's clocks fall while it idles (345 MHz idle,
// 1980 MHz busy on the H100) and production's first steps after a long pause are slow; after
// short gaps (a server between requests, a loop waiting for its data) there is no ramp-up, and in
// the simulator's idle_gaps trace (50 ms busy, 150 ms idle) skipping those windows left the budget
// few samples and production at 0.908 instead of 0.940.
constexpr uint32_t kReturnSettlingWindows = 2;
constexpr uint32_t kLongIdleWindows = 10;
// With concurrency, a production job's first busy time (its warm-up) is not measured. On the H200
// (S1b and S5 beside gpushared's MPS, 2026-11-26) the differences between adjacent periods in a
// job's first second of busy time were as large as 1-2.6 in log speed (start-up: 5-15 kernels/ms
// against 40 later), clipped at 1 and still the largest of a short run's few; after it, none was
// above 0.35. One such pair read gated as e times faster than paused, and fitted with the others
// it halved beside's measured 25 % cost to 12 % +- 12 %, which passed as noise: beside ran 90 %
// of production's busy time and production kept 0.82 (S5 saturating); in S1b they read a cost of
// 14 % where the rest read 4 %. Hence warm_up_ms: 0.75 s by default, since on the H100 a resnet50
// b8 job's start-up took 12 windows with progress (0.6 s; 1.5 s until 2026-11-26, which in S5 with
// fresh daemons held the opportunistic job back for the whole first busy phase of the window).
// Where an opportunistic job ran in the last window, for its queue bound (queue_bound.h): while
// production idled, beside busy production, or under another bound or none.
enum class QueueState { idle, beside, other };

struct OpportunisticJob {
  double carry = 0;
  QueueState state = QueueState::other;  // under the gate of the last window
  QueueRate idle_rate, beside_rate;      // its launch rates in those states
  bool backlogged = false;  // waited at its gate in the last window
  // Wants to run: it launched, waited at its gate or had kernels queued in the last window, or it
  // waited at its gate before and has launched nothing since (a launch held for whole windows
  // counts its wait once). A job idle by its own choice (loading data, between requests, still
  // starting up) is not.
  bool wants_to_run = false;
  bool waiting = false;  // waited at its gate and has not launched freely since
};

enum class Probe { off, settling, measuring };

class HarvestPolicy final : public Policy {
 public:
  explicit HarvestPolicy(const Parameters& p)
      : target_(p.at("target")),
        tolerance_(p.at("tolerance")),
        halve_deviation_(p.at("halve_deviation")),
        decrease_(p.at("decrease")),
        increase_(p.at("increase")),
        control_period_ns_(static_cast<uint64_t>(p.at("control_period_ms") * 1e6)),
        learning_period_ns_(static_cast<uint64_t>(p.at("learning_period_ms") * 1e6)),
        reference_period_ns_(static_cast<uint64_t>(p.at("reference_period_ms") * 1e6)),
        probe_interval_ns_(static_cast<uint64_t>(p.at("probe_interval_ms") * 1e6)),
        noise_margin_(p.at("noise_margin")),
        idle_windows_needed_(static_cast<uint32_t>(p.at("idle_windows"))),
        idle_release_(p.at("idle_release") != 0),
        in_flight_(static_cast<uint32_t>(p.at("in_flight"))),
        queue_ms_(p.at("queue_ms")),
        loop_queue_ms_(p.at("loop_queue_ms")),
        idle_queue_ms_(p.at("idle_queue_ms")),
        warm_up_ns_(static_cast<uint64_t>(p.at("warm_up_ms") * 1e6)),
        kernel_gating_(p.at("kernel_gating") != 0),
        gating_busy_limit_(p.at("gating_busy_limit")),
        gating_retry_ns_(static_cast<uint64_t>(p.at("gating_retry_ms") * 1e6)),
        concurrency_setting_(static_cast<int>(p.at("concurrency"))),
        concurrency_(concurrency_setting_ == 1),
        estimator_{.tolerance = p.at("tolerance"),
                   .smoothing = p.at("smoothing"),
                   .noise_margin = noise_margin_,
                   .solo_samples = static_cast<size_t>(p.at("solo_samples"))},
        budget_({.target = p.at("target"),
                 .noise_margin = p.at("noise_margin"),
                 .reference_share = p.at("reference_share"),
                 .explore_share = kExploreShare,
                 .samples = static_cast<size_t>(p.at("cost_samples")),
                 .doubt_samples = p.at("doubt_samples"),
                 .gaps_limit = p.at("gating_busy_limit"),
                 .throughput_cost = p.at("throughput_cost") != 0,
                 .robust_costs = p.at("robust_costs") != 0,
                 .reference_length = p.at("reference_period_ms") / p.at("learning_period_ms"),
                 .tail_factor = p.at("tail_factor"),
                 .clear_margin = p.at("clear_margin")}) {}

  std::string_view name() const override { return "harvest"; }
  std::optional<double> production_progress() const override {
    if (!concurrency_) return progress_;
    // What the schedule costs the slowest production job: each mode's share times its cost.
    const ModeMeasures measures = budget_.measures();
    const std::array<double, kRunModes> shares = budget_.shares();
    double loss = 0;
    for (size_t m = 0; m < kRunModes; ++m) {
      if (!measures.cost[m]) return std::nullopt;
      loss += shares[m] * std::max(0.0, measures.cost[m]->harm);
    }
    return 1 - loss;
  }

  // With concurrency: each mode's cost to production (± its error and, in brackets, the pairs of
  // periods it rests on; "?" until measured), its gain and its share of production's busy time,
  // e.g. "budget gated=0.03±0.02(5)/41:0.05 beside=0.12±0.05(16)/480:0.40 busy=0.97"; " held"
  // at the end where the next window, gated, holds the opportunistic jobs (saturated_hold).
  std::string explain() const override {
    if (!concurrency_) return {};
    const ModeMeasures measures = budget_.measures();
    const std::array<double, kRunModes> shares = budget_.shares();
    std::string text = "budget";
    for (RunMode m : {RunMode::gated, RunMode::beside}) {
      const size_t i = static_cast<size_t>(m);
      const auto& cost = measures.cost[i];
      const auto& gain = measures.gain[i];
      char part[96];
      std::snprintf(part, sizeof part, " %s=", m == RunMode::gated ? "gated" : "beside");
      text += part;
      if (cost)
        std::snprintf(part, sizeof part, "%.3f±%.3f(%.0f)", cost->harm, cost->error, cost->samples);
      text += cost ? part : "?";
      if (gain) std::snprintf(part, sizeof part, "/%.0f", *gain);
      text += gain ? part : "/?";
      std::snprintf(part, sizeof part, ":%.2f", shares[i]);
      text += part;
    }
    // Production's in-flight share of its paused windows: gated is learnt only below
    // gating_busy_limit (it runs in production's gaps).
    char busy[32] = " busy=?";
    if (measures.busy) std::snprintf(busy, sizeof busy, " busy=%.2f", *measures.busy);
    // How often what the budget learnt of production was dropped and learnt again (a loop found
    // leaving gaps, loop_left; a solo speed that jumped, speed_jumped); then a gated window held
    // because production left no gaps (saturated_hold: its gates say paused).
    const std::string relearnt =
        budget_.relearnt() > 0 ? " relearnt=" + std::to_string(budget_.relearnt()) : "";
    return text + busy + relearnt + (saturated_hold() ? " held" : "");
  }

  std::vector<Gate> decide(const DeviceObservation& device) override {
    window_s_ = window_seconds(device);
    bool production_busy = false;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::production && !is_idle(job)) production_busy = true;
    const bool production_joined = track_jobs(device, production_busy);
    if (concurrency_setting_ == kConcurrencyWhereMps) follow_substrate(device);
    sharing_.observe(device);
    idle_windows_ = production_busy ? 0 : std::min(idle_windows_ + 1, idle_windows_needed_);
    if (production_busy) busy_phases_.busy(device.window_ns);

    if (production_.empty() || idle_windows_ >= idle_windows_needed_) {
      on_production_idle(device);
    } else if (production_idle_) {
      production_idle_ = false;  // back: this window is mixed, measure from the next
      // With concurrency, after a long idle phase production ramps up: what follows is not set
      // against the periods before it. After a short one (a server between requests) it runs as
      // before, and the period goes on across the gap: a server busy one window in four (the
      // simulator's idle_gaps trace) never completed a period when each gap ended it, and the
      // costs were never measured.
      const bool long_idle = idle_phase_windows_ >= kLongIdleWindows;
      if (!concurrency_ || long_idle) reset_period();
      if (concurrency_ && long_idle) {
        settling_windows_ = kReturnSettlingWindows;
        budget_.break_sequence();
        mode_ = budget_.resume_mode(mode_);
      }
    } else {
      measure_window(device);
    }
    if (kernel_gating_ && !concurrency_) follow_gaps(device);
    if (production_joined && !opportunistic_.empty() && !gating() && !concurrency_) start_probe();
    return gates(device);
  }

 private:
  // `production_busy`: some production job worked in this window. The windows in which production
  // has just gone idle (before idle_windows declare it) ran under the beside gate but alone: their
  // rate is not the job's rate beside production (counted there, the beside bound grew by half in
  // a model of 1 s phases).
  bool track_jobs(const DeviceObservation& device, bool production_busy) {
    std::map<uint64_t, OpportunisticJob> opportunistic;
    for (const JobObservation& job : device.jobs) {
      if (job.job_class == JobClass::opportunistic) {
        OpportunisticJob& state = opportunistic[job.job_id] = opportunistic_[job.job_id];
        if (job.launches > 0 && state.state == QueueState::idle)
          state.idle_rate.record(static_cast<double>(job.launches) / window_s_);
        else if (job.launches > 0 && state.state == QueueState::beside && production_busy)
          state.beside_rate.record(static_cast<double>(job.launches) / window_s_);
        state.backlogged = job.gate_waits > 0;
        if (job.gate_waits > 0)
          state.waiting = true;
        else if (job.launches > 0)
          state.waiting = false;
        state.wants_to_run = job.launches > 0 || job.in_flight.value_or(0) > 0 || state.waiting;
      }
    }
    opportunistic_ = std::move(opportunistic);
    return tgs::track_production(device, production_);
  }

  // concurrency=2: the budget where every opportunistic job on the device is an MPS client, so
  // that running beside production means at client priority 1; elsewhere gating and the law. On
  // the H100 the budget without MPS lost production (S1b 0.73-0.88, S5 gappy 0.85), on MPS-prio it
  // kept it (0.99, 0.95) and harvested more than gating (0.85 against 0.62, 0.68 against 0.40).
  // A device with no opportunistic job keeps its mode: nothing runs beside production there.
  void follow_substrate(const DeviceObservation& device) {
    bool any = false, all_on_mps = true;
    for (const JobObservation& job : device.jobs) {
      if (job.job_class != JobClass::opportunistic) continue;
      any = true;
      all_on_mps = all_on_mps && job.mps_client;
    }
    if (!any || all_on_mps == concurrency_) return;
    concurrency_ = all_on_mps;
    // Each mechanism starts afresh: no probe or limit of the law, no budget period half done.
    mode_ = RunMode::paused;
    settling_windows_ = 0;
    probe_ = Probe::off;
    limit_ = kNoLimit;
    lift_periods_ = 0;
    gating_ = true;
    gap_busy_ns_ = gap_window_ns_ = 0;
    reset_period();
    budget_.break_sequence();
  }

  // Kernel gating while production leaves gaps (production_idle_only: the opportunistic jobs run
  // only when production has nothing in flight, which protects it at kernel granularity and needs
  // no rate law), the rate law while it leaves none (gating would starve the opportunistic jobs
  // for nothing: on the H100 a b8 training job keeps kernels in flight all the time, yet leaves
  // SMs that MPS client priority hands out). Production's busy fraction comes from the daemon's
  // idle relay (in_flight_ns), which samples only while gating: the law runs for gating_retry_ms,
  // then one gated period measures the gaps again.
  bool gating() const {
    return concurrency_ ? mode_ == RunMode::gated : kernel_gating_ && gating_;
  }

  void follow_gaps(const DeviceObservation& device) {
    if (!gating_) {
      if (device.now_ns >= law_until_ns_) switch_gating(true);
      return;
    }
    if (production_idle_) {
      gap_busy_ns_ = gap_window_ns_ = 0;
      return;
    }
    const std::optional<uint64_t> busiest = busiest_in_flight_ns(device);
    if (!busiest) return;  // the relay had not sampled yet (its first window)
    gap_busy_ns_ += static_cast<double>(*busiest);
    gap_window_ns_ += device.window_ns;
    // In whole windows, as every period here (`reached`).
    if (!reached(gap_window_ns_, control_period_ns_, device.window_ns)) return;
    const bool saturated = gap_busy_ns_ >= gating_busy_limit_ * static_cast<double>(gap_window_ns_);
    gap_busy_ns_ = gap_window_ns_ = 0;
    if (saturated) {
      law_until_ns_ = device.now_ns + gating_retry_ns_;
      switch_gating(false);
    }
  }

  void switch_gating(bool on) {
    gating_ = on;
    gap_busy_ns_ = gap_window_ns_ = 0;
    probe_ = Probe::off;
    reset_period();  // a period measured half gated says nothing of either mode
  }

  void on_production_idle(const DeviceObservation& device) {
    if (!production_idle_) {
      if (!concurrency_) reset_period();  // the budget's period resumes when production is back
      idle_phase_windows_ = 0;
      // A phase that ends while production warms up is its start-up, not its pattern: on the H100
      // (S5, fresh daemons, 2026-11-26) a transformer server's first phases lasted 1-7 windows
      // before its 21-window ones, and their median kept its idle queue at 8-9 ms for the
      // benchmark's whole window.
      if (warming_)
        busy_phases_.drop();
      else
        busy_phases_.end();
    }
    ++idle_phase_windows_;
    production_idle_ = true;
    saturated_ = false;
    probe_ = Probe::off;
    settling_windows_ = 0;
    // What the class takes unthrottled: the scale of the additive increase and the floor.
    double launches = 0;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::opportunistic) launches += static_cast<double>(job.launches);
    unthrottled_rate_ = std::max(unthrottled_rate_, launches / window_s_);
    for (auto& [id, job] : production_) job.rate_estimate = 0;  // its load may differ when back
  }

  void measure_window(const DeviceObservation& device) {
    if (concurrency_) {
      measure_concurrency_window(device);
      return;
    }
    if (probe_ == Probe::settling) {
      // Opportunistic kernels queued before the pause ran in this window: measure from the next.
      probe_ = Probe::measuring;
      reset_period();
      return;
    }
    uint64_t opportunistic_launches = 0;
    for (const JobObservation& job : device.jobs) {
      if (job.job_class == JobClass::production) {
        production_[job.job_id].period_progress += production_[job.job_id].window_progress;
      } else {
        opportunistic_launches += job.launches;
        period_blocked_ = period_blocked_ || job.gate_waits > 0;
      }
    }
    period_opportunistic_launches_ += opportunistic_launches;
    period_ns_ += device.window_ns;
    if (reached(period_ns_, control_period_ns_, device.window_ns)) end_period();
  }

  // The concurrency budget (concurrency_budget.h): each busy control period is paused, gated or
  // beside, chosen by the budget; the first window after a change is not measured (opportunistic
  // kernels queued before it, or their ramp-up, belong to neither mode). A production job's speed
  // in a period is its work over its busy time (from the idle relay; the window's length where it
  // has not sampled) in the period's measured windows, and the budget sets each period against
  // the one just before it.
  void measure_concurrency_window(const DeviceObservation& device) {
    // The settling window counts toward the period's length, so that beside periods take the
    // budget's share of production's time and not more (in a model with a 30 % cost, counting
    // them apart gave beside 0.19 of the windows for a share of 0.16).
    period_ns_ += device.window_ns;
    // Shorter while beside's cost is learnt: on the H100 (S5, 2026-11-26, calls 37-45) a noisy
    // production job's pairs of adjacent periods spread little more with two measured windows each
    // than with three (most of its noise is of the period; tools/bench/period_noise.py), so
    // shorter periods learn the cost sooner, and a costly mode's learning periods cost production
    // less (in the model of a fresh benchmark window, production kept 0.948 instead of 0.937
    // beside a job that running beside slows by 25 %, 0.966 instead of 0.945 at 36 %).
    // A paused period is shorter still (reference_period_ms, one measured window; learning_share
    // in concurrency_budget.h; after production's return ConcurrencyBudget::resume_mode keeps its
    // least steady windows out of the reference where it can). No period ends on a window it does
    // not measure.
    // A brief mode (brief_exposure: its cost not yet known, or one that would stretch a server's
    // requests, where production may be a server) runs one measured window at a time, or its
    // period's length where no window of it is measured (no opportunistic demand).
    const bool brief = budget_.brief(mode_);
    const uint64_t period_length =
        mode_ == RunMode::paused ? reference_period_ns_ : busy_period_ns();
    const bool settling = settling_windows_ > 0;
    if (settling) --settling_windows_;
    // A gated window through which the opportunistic jobs were held (saturated_hold, read before
    // this window's saturation replaces the last one's: what the gates of that window saw)
    // measures neither mode; the period may still end on it, so that one never outlasts its
    // length.
    const bool held = saturated_hold();
    saturated_ = gap_free(device);
    bool period_over = !settling && reached(period_ns_, period_length, device.window_ns);
    // A window in which no opportunistic job wanted to run says nothing of what a mode costs
    // production or gains the opportunistic jobs: it is not measured. Gains of 0 read while the
    // opportunistic job idled by its own choice (starting up or warming up while production ran)
    // make running beside production look worthless; gating then takes all of production's busy
    // time and beside, given none, is never measured again. Modelled, that start left the
    // opportunistic job 0.044 of its solo speed while production was busy: what S5 on
    // gpushared's MPS gave on the H100 (0.02-0.04, twice; those runs logged no ticks). The
    // paused reference needs no opportunistic demand.
    bool demand = false;
    for (const auto& [id, job] : opportunistic_) demand = demand || job.wants_to_run;
    const bool measured = !settling && !held && (mode_ == RunMode::paused || demand);
    period_demand_ = period_demand_ || demand;
    std::set<uint64_t> alive;
    double opportunistic_launches = 0;
    std::optional<double> busiest;  // the busiest measured production job's in-flight share
    bool recorded = false;          // some production job's window went to the budget
    warming_ = false;
    for (const JobObservation& job : device.jobs) {
      if (job.job_class == JobClass::opportunistic) {
        opportunistic_launches += static_cast<double>(job.launches);
        continue;
      }
      alive.insert(job.job_id);
      WarmUp& warm_up =
          warm_ups_
              .try_emplace(job.job_id,
                           WarmUp{.warming = warm_up_ns_ > 0, .progress_ns = 0, .log_speeds = {}})
              .first->second;
      const bool warming = warm_up.warming;
      // Counted in windows with progress, not in-flight time, so that how long the opportunistic
      // jobs wait does not depend on how busy production keeps the GPU (a server in flight a
      // tenth of each window would hold them for 15 s of its busy windows).
      const uint64_t progress = production_[job.job_id].window_progress;
      if (warming && progress > 0) {
        const uint64_t busy_ns = job.in_flight_ns.value_or(0);
        warm_up.progress_ns += device.window_ns;
        warm_up.log_speeds.push_back(
            std::log(static_cast<double>(progress) /
                     static_cast<double>(busy_ns > 0 ? busy_ns : device.window_ns)));
        if (warm_up.log_speeds.size() > 2 * kSettleWindows) warm_up.log_speeds.pop_front();
      }
      warm_up.warming = warming && still_warming(warm_up, device.window_ns);
      warming_ = warming_ || warm_up.warming;
      // The budget's periods hold measured windows of one mode only, after the job's warm-up.
      if (!measured || warming) continue;
      if (job.in_flight_ns && device.window_ns > 0)
        busiest = std::max(busiest.value_or(0.0), static_cast<double>(*job.in_flight_ns) /
                                                      static_cast<double>(device.window_ns));
      // A window of an idle job (before idle_windows declare it so) does not count. Its speed in
      // flight is read over the time its completions took where the relay timed them
      // (JobObservation::paced_in_flight_ns).
      const uint64_t in_flight_ns = job.paced_in_flight_ns.value_or(0) > 0
                                        ? *job.paced_in_flight_ns
                                        : job.in_flight_ns.value_or(device.window_ns);
      recorded = budget_.record_speed(job.job_id, mode_,
                                      static_cast<double>(production_[job.job_id].window_progress),
                                      static_cast<double>(in_flight_ns),
                                      static_cast<double>(device.window_ns)) ||
                 recorded;
    }
    if (measured && !opportunistic_.empty()) budget_.record_gain(mode_, opportunistic_launches);
    if (busiest) budget_.record_busy(mode_, *busiest, recorded);
    budget_.retain(alive);
    std::erase_if(warm_ups_, [&](const auto& entry) { return !alive.count(entry.first); });
    if (brief && recorded && !warming_) period_over = true;
    if (warming_) {
      // A production job warms up: the opportunistic jobs wait (paused) and the budget's rotation
      // waits with them, for warm_up_ms of its busy time. Beside instead (no throttle) cost
      // production what running beside it costs for that time: on the H100 (S5,
      // transformer_infer_b8 1 s on and off, fresh daemons, 2026-11-26) beside cost it 41 %, the
      // warm-up fell in the benchmark's window, and production kept 0.757 (0.902 with the paused
      // warm-up of 1.5 s and the learning of the build before). Gated costs a saturating job 25 %.
      // Every warming window, not only at a period's end: the warm-up's windows do not count
      // toward the first paused period after it, which then ends on a window it measures (its
      // busy share tells a server before beside first runs: brief_exposure).
      period_ns_ = 0;
      period_demand_ = false;
      if (mode_ != RunMode::paused) settling_windows_ = std::max<uint32_t>(settling_windows_, 1);
      mode_ = RunMode::paused;
      return;
    }
    if (!period_over) return;
    // The period's length in periods of the others (a paused one is shorter), for the budget's
    // shares of production's time.
    // A period in which no opportunistic job wanted to run ran nothing beside production.
    const RunMode next = budget_.next_period(mode_,
                                             in_windows(period_ns_, device.window_ns) /
                                                 period_windows(busy_period_ns(), device.window_ns),
                                             period_demand_);
    // A brief mode is measured from its first window where nothing or little of the
    // opportunistic jobs was queued before it: after paused, or gated (the in-flight bound, run
    // in production's gaps); beside's queue (queue_ms) would spill into it.
    const bool at_once = mode_ != RunMode::beside && budget_.brief(next);
    if (next != mode_ && !at_once) settling_windows_ = std::max<uint32_t>(settling_windows_, 1);
    mode_ = next;
    period_ns_ = 0;
    period_demand_ = false;
  }

  // Whether production, back from idle now, would run beside the opportunistic jobs at no cost
  // beyond the target: the period in progress is beside (resume_mode keeps such a period; one
  // paused may turn beside at a long idle's end, but a short one keeps it paused, so only beside
  // is certain), with no warm-up (its windows are paused), and beside's cost fits the target over
  // all of production's time. The return's window is not measured: where beside is rationed
  // (its cost above the allowance) running there would be a loss no period accounts for. In the
  // model of a fresh benchmark window (AFreshBudgetHarvestsInTheBenchmarksWindow) not holding
  // at every return into beside kept production at 0.955 instead of 0.963 beside a job that
  // running beside slows by 36 %.
  bool resumes_beside() const {
    return mode_ == RunMode::beside && !warming_ && budget_.fits_target(RunMode::beside);
  }

  // The length of a gated or beside period: shorter while beside's cost is learnt.
  uint64_t busy_period_ns() const {
    return budget_.learning() ? learning_period_ns_ : control_period_ns_;
  }

  void end_period() {
    const double period_s = static_cast<double>(period_ns_) / kNsPerSecond;
    // A gated period is as good as a probe: the opportunistic jobs ran only in production's gaps.
    const bool probed = probe_ == Probe::measuring || gating();
    probe_ = Probe::off;
    const double opportunistic_rate = static_cast<double>(period_opportunistic_launches_) / period_s;
    if (limit_ == kNoLimit && !probed)
      unthrottled_rate_ = std::max(unthrottled_rate_ * 0.9, opportunistic_rate);
    double slowest = kNoLimit;
    double slowest_error = 0;
    bool solo_missing = false;
    bool solo_young = false;  // a production job's solo rate rests on few probes
    for (auto& [id, job] : production_) {
      if (job.period_progress == 0) continue;  // idle all period: says nothing
      const double rate = static_cast<double>(job.period_progress) / period_s;
      // Only probes teach the solo rate. A probe far from it, either way, means the older samples
      // describe a job that no longer exists:
      // below, production's load fell (nothing else ran, so it is not contention); above, they
      // were taken while it started up (on the H100 the first probe of a resnet50 job measured
      // 4 % of its steady rate, and the median held that for three probes).
      if (probed && job.solo_probed &&
          std::abs(rate - job.solo_rate) > kReplaceDeviation * job.solo_rate)
        job.solo_next = 0;
      // Only probes: tgs also takes a period faster than the solo rate as a sample, but a
      // launch-bound job's periods reach 1.2 x its steady rate by noise alone, and on the H100
      // (S1b under MPS client priority) two such periods raised its solo rate by 20 %; its normal
      // rate then read as 0.85 and the law held the opportunistic job at its floor.
      if (probed) tgs::update_solo(job, rate, true, true, estimator_);
      solo_missing = solo_missing || !job.solo_probed;
      solo_young = solo_young || job.solo_next < kYoungSamples;
      if (probed) continue;
      tgs::update_estimate(job, rate, estimator_);
      if (job.solo_probed && job.rate_estimate / job.solo_rate < slowest) {
        slowest = job.rate_estimate / job.solo_rate;
        slowest_error = tgs::standard_error(job, estimator_);
      }
    }
    busy_since_probe_ns_ = probed ? 0 : busy_since_probe_ns_ + period_ns_;
    if (!probed) progress_ = slowest != kNoLimit ? std::optional<double>(slowest) : std::nullopt;
    if (!probed && slowest != kNoLimit && !opportunistic_.empty())
      control(slowest, slowest_error, opportunistic_rate);
    reset_period();
    const uint64_t interval =
        solo_young ? std::min(probe_interval_ns_, kYoungProbeIntervalNs) : probe_interval_ns_;
    const bool probe_due = probe_interval_ns_ > 0 && busy_since_probe_ns_ >= interval;
    if (!opportunistic_.empty() && (solo_missing || probe_due) && !gating()) start_probe();
  }

  // The law. `slowest`: the lowest production estimate / solo rate; `error`: its relative standard
  // error; `used`: the opportunistic class's launches/s in the period.
  void control(double slowest, double error, double used) {
    const double shortfall = (target_ - slowest) / target_;  // > 0: production below target
    const double margin = noise_margin_ * error;
    const double scale = std::max(unthrottled_rate_, used);
    const double floor = std::max(kFloorFraction * scale, 1 / window_s_);
    // Unthrottled, only a shortfall of twice the noise starts throttling: a launch-bound
    // production job beside an unthrottled one dipped to 0.89 of its solo rate by noise alone
    // (S1b on the H100, margin 0.04), and the law then held the opportunistic job near its floor.
    // Throttled, the law moves on half the margin, either way: with the whole margin it settled
    // one margin below the target (S1a: 0.90 with the margin at 0.05), with none it ratcheted
    // the limit down on every noisy period below the target (S1b: opportunistic 0.34).
    const bool throttled = limit_ != kNoLimit;
    const double band = throttled ? margin / 2 : 2 * margin;
    if (shortfall > band) {
      lift_periods_ = 0;
      // The first throttle starts from what the class used unthrottled.
      double limit = limit_ == kNoLimit ? std::max(used, floor) : limit_;
      if (shortfall >= halve_deviation_ + margin)
        limit /= 2;
      else
        limit *= 1 - decrease_ * std::min(1.0, shortfall / (tolerance_ + margin));
      limit_ = std::max(limit, floor);
      return;
    }
    if (limit_ == kNoLimit) return;
    // At the target within half the noise: grow, and lift a limit that no longer holds the class.
    const bool unused = !period_blocked_ && limit_ >= kUnusedFactor * used;
    lift_periods_ = shortfall <= 0 && unused ? lift_periods_ + 1 : 0;
    if (lift_periods_ >= kLiftPeriods || limit_ >= scale) {
      limit_ = kNoLimit;
      lift_periods_ = 0;
      return;
    }
    limit_ += increase_ * scale;
  }

  void start_probe() {
    probe_ = Probe::settling;
    reset_period();
  }

  void reset_period() {
    period_ns_ = 0;
    period_demand_ = false;
    period_blocked_ = false;
    period_opportunistic_launches_ = 0;
    for (auto& [id, job] : production_) job.period_progress = 0;
  }

  // The longest time a production job had work in flight in this window (none: the relay has
  // not sampled any).
  static std::optional<uint64_t> busiest_in_flight_ns(const DeviceObservation& device) {
    std::optional<uint64_t> busiest;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::production && job.in_flight_ns)
        busiest = std::max(busiest.value_or(0), *job.in_flight_ns);
    return busiest;
  }

  // Whether a production job was in flight at least gating_busy_limit of this window: it left
  // no gaps for gated to fill.
  bool gap_free(const DeviceObservation& device) const {
    const std::optional<uint64_t> busiest = busiest_in_flight_ns(device);
    return busiest && static_cast<double>(*busiest) >=
                          gating_busy_limit_ * static_cast<double>(device.window_ns);
  }

  // A saturated server is not gated into. Gated runs the opportunistic jobs in production's gaps;
  // where production normally leaves gaps (its paused windows in flight less than
  // gating_busy_limit of the time: a server between requests) but left none in the last window,
  // its queue is building, and every short gap still lets up to the in-flight bound of
  // opportunistic kernels in, which slow the requests behind them. On the H100 (S2, the
  // transformer server at load 0.5 beside transformer training, 2026-11-27 call 87) one gated
  // period ran 28 windows in a row with the server in flight 93-97 % of each, its speed in flight
  // at about 8.5 kernels per ms against 17-20, the opportunistic job launching 11-51 kernels a
  // window (against about 400 in gated windows with gaps), and that repetition's p99 was 562 ms
  // against isolated's 15. So the next window holds them (paused), unmeasured, until production
  // shows gaps again; a loop that never leaves gaps is the budget's to ration, not held here.
  bool saturated_hold() const {
    if (!concurrency_ || mode_ != RunMode::gated || production_idle_ || !saturated_) return false;
    const std::optional<double> busy = budget_.paused_busy();
    return busy && *busy < gating_busy_limit_;
  }

  std::vector<Gate> gates(const DeviceObservation& device) {
    std::vector<Claim> claims;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::opportunistic)
        claims.push_back({job.weight, kNoLimit});
    const bool limited = !production_idle_ && limit_ != kNoLimit && !gating();
    const std::vector<double> shares =
        limited ? split_by_weight(limit_ * window_s_, claims) : std::vector<double>{};
    // While production idles each opportunistic job may queue this much of its work.
    const double idle_ms = idle_queue_ms(busy_phases_.typical_s(), queue_ms_, idle_queue_ms_);
    const double beside_ms =
        beside_queue_ms(budget_.paused_busy(), gating_busy_limit_, queue_ms_, loop_queue_ms_);
    // idle_release: production idle for a window while the budget holds the opportunistic jobs
    // paused. Waiting for idle_windows (3) to declare it idle left the GPU idle for 150-200 ms of
    // each of production's idle phases (S5 on the H100, 2026-11-27: take back 200 ms beside a
    // transformer server, against 50 ms where the budget ran them beside production). Released
    // now, idle-gated as in gated periods: the relay holds them the moment production launches
    // again, and production meets at most the in-flight bound of their kernels (at client
    // priority 1 on MPS it waits only for the blocks already running). The window of its return
    // is measured as before, in every mode alike: skipping it in paused periods alone would leave
    // a return's slow start (clocks, production's own restart) to beside's and gated's account,
    // and a server busy one window at a time would never be measured at all if every return were
    // skipped. Not in a probe of the rate law: its windows must be clean.
    const bool released = idle_release_ && concurrency_ && !production_idle_ && idle_windows_ > 0 &&
                          mode_ == RunMode::paused && probe_ == Probe::off;
    const bool hold_at_return = concurrency_ && production_idle_ && !resumes_beside();
    const bool hold = saturated_hold();
    std::vector<Gate> gates;
    gates.reserve(device.jobs.size());
    size_t k = 0;
    for (const JobObservation& job : device.jobs) {
      Gate gate{.job_id = job.job_id};
      if (job.job_class == JobClass::opportunistic) {
        // With kernel gating the bound is what makes gating safe: production, back, meets at
        // most in_flight opportunistic kernels. It costs the opportunistic job throughput (0.78
        // of its solo rate while production idled, mobilenet_v2 on the H100, bound 4), so it holds
        // only while gating and production is active; the law runs without one.
        // Elsewhere, while production idles or runs beside it, the job may queue a few ms of
        // its own work (queue_bound.h): production, back or paused, then meets a short queue.
        // While production idles that is up to idle_queue_ms, as its busy phases allow.
        OpportunisticJob& state = opportunistic_[job.job_id];
        const bool paused = ((probe_ != Probe::off || (concurrency_ && mode_ == RunMode::paused)) &&
                             !production_idle_ && !released) ||
                            hold;
        state.state = !kernel_gating_ && !concurrency_                      ? QueueState::other
                      : production_idle_                                    ? QueueState::idle
                      : concurrency_ && mode_ == RunMode::beside && !paused ? QueueState::beside
                                                                            : QueueState::other;
        const uint32_t least = std::max<uint32_t>(2, in_flight_);
        gate.max_in_flight =
            !kernel_gating_ && !concurrency_    ? in_flight_
            : gating() && !production_idle_     ? in_flight_
            : released                          ? least
            : state.state == QueueState::idle   ? state.idle_rate.bound(idle_ms, least)
            : state.state == QueueState::beside ? state.beside_rate.bound(beside_ms, least)
                                                : 0;
        // With concurrency and production idle, the relay holds the opportunistic jobs the moment
        // production launches again, until the next tick applies the mode of the busy period: in
        // S5 on the H100 production paused for whole on-phases still reached only 0.87-0.91,
        // losing each on-phase's start to the opportunistic launches of up to a window, and that
        // window is not measured (the first one after production's return is skipped), so the
        // budget cannot see that loss to ration it.
        // Except where the period production comes back to runs beside (resumes_beside): the
        // tick would only release them again, and the hold took each return's window up to the
        // tick, half of one on average, from the opportunistic jobs. On the H100 (S5 gappy
        // resnet50 b8, 1 s on and off, 2026-11-27 call 70) one daemon's returns came a mean 11 ms
        // before a tick, another's 48 ms (the phases keep their place against the ticks within a
        // run): there the job launched almost nothing in each return's window, about 5 % of each
        // on-phase. Without the hold (calls 73-74, 27 repetitions each way) it got 0.62 of its solo
        // rate in the on-phases' first 0.1 s instead of 0.48, production 0.960 against 0.967.
        gate.production_idle_only = gating() || released || hold_at_return;
        // The budget compares production's speed per busy second in every mode: the relay must
        // sample its busy time in paused and beside periods too.
        gate.measure_production = concurrency_;
        if (paused)
          gate.paused = true;
        else if (limited)
          gate.launches = whole_launches(shares[k], opportunistic_[job.job_id].carry);
        ++k;
      }
      gates.push_back(gate);
    }
    // Unthrottled opportunistic jobs still share what they get by weight among themselves.
    if (!limited && probe_ == Probe::off) sharing_.share(device, JobClass::opportunistic, gates);
    return gates;
  }

  // Parameters.
  const double target_, tolerance_, halve_deviation_, decrease_, increase_;
  const uint64_t control_period_ns_, learning_period_ns_, reference_period_ns_, probe_interval_ns_;
  const double noise_margin_;
  const uint32_t idle_windows_needed_;
  const bool idle_release_;
  const uint32_t in_flight_;
  const double queue_ms_, loop_queue_ms_, idle_queue_ms_;
  const uint64_t warm_up_ns_;
  const bool kernel_gating_;
  const double gating_busy_limit_;
  const uint64_t gating_retry_ns_;
  const int concurrency_setting_;
  bool concurrency_;  // the budget is in force (concurrency_setting_ 1, or 2 on MPS)
  const EstimatorSettings estimator_;
  std::optional<double> progress_;  // slowest production estimate / solo rate, last period

  // Control state.
  double limit_ = kNoLimit;        // opportunistic launches/s while production is busy
  bool gating_ = true;             // with kernel_gating: gating (else the law) while busy
  uint64_t law_until_ns_ = 0;      // the law runs until then, then the gaps are measured again
  double gap_busy_ns_ = 0;         // production's busy time in a gated period ...
  uint64_t gap_window_ns_ = 0;     // ... and the period's time so far
  double unthrottled_rate_ = 0;    // what the class takes unthrottled (launches/s)
  int lift_periods_ = 0;
  bool production_idle_ = true;
  uint32_t idle_windows_ = 0;
  Probe probe_ = Probe::off;
  uint64_t busy_since_probe_ns_ = 0;
  double window_s_ = 0;

  // With concurrency: the budget, the kind of the period in progress, whether its first window
  // (after a change of kind) is still to be skipped.
  ConcurrencyBudget budget_;
  RunMode mode_ = RunMode::paused;
  uint32_t settling_windows_ = 0;  // windows still to skip (after a change of mode, a return)
  bool saturated_ = false;         // with concurrency: production left no gaps in the last window
  BusyPhases busy_phases_;         // production's, for the queue bound while it idles
  uint32_t idle_phase_windows_ = 0;  // windows of the idle phase in progress (or the last one)

  // The period in progress.
  uint64_t period_ns_ = 0;
  bool period_demand_ = false;  // some opportunistic job wanted to run in the period so far
  bool period_blocked_ = false;
  uint64_t period_opportunistic_launches_ = 0;

  std::map<uint64_t, ProductionJob> production_;
  // With concurrency: each production job's warm-up (still_warming).
  struct WarmUp {
    bool warming = true;
    uint64_t progress_ns = 0;       // its windows with progress so far
    std::deque<double> log_speeds;  // ... the last 2 x kSettleWindows of them (still_climbing)
  };
  std::map<uint64_t, WarmUp> warm_ups_;
  bool warming_ = false;  // some production job on the device still warms up

  // Whether a production job still warms up: warm_up_ms of windows with progress (in whole
  // windows, as every period here: `reached`), and beyond it, up to kWarmUpLimit times as long,
  // while its speed still climbs (still_climbing). Once over, over for good: a later rise is a
  // return from idle (resume_mode) or a new solo speed (speed_jumped), not a start-up.
  bool still_warming(const WarmUp& warm_up, uint64_t window_ns) const {
    if (warm_up_ns_ == 0) return false;
    if (!reached(warm_up.progress_ns, warm_up_ns_, window_ns)) return true;
    const auto limit = static_cast<uint64_t>(kWarmUpLimit * static_cast<double>(warm_up_ns_));
    return !reached(warm_up.progress_ns, limit, window_ns) && still_climbing(warm_up.log_speeds);
  }
  std::map<uint64_t, OpportunisticJob> opportunistic_;
  ClassSharing sharing_{kSharingHeadroom};
};

}  // namespace

std::span<const ParameterSpec> harvest_parameters() {
  return kParameters;
}

std::unique_ptr<Policy> make_harvest(const Parameters& resolved) {
  return std::make_unique<HarvestPolicy>(resolved);
}

}  // namespace gpushare::policies
