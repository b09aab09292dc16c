// `tgs`: adaptive rate control after TGS (NSDI'23; pkusys/TGS
// hijack/src/low_priority_hijack_call.c, update_rate_limit). Production jobs run unlimited; the
// opportunistic class gets a launch rate limit that a closed loop moves so that the slowest
// production job keeps `target` of its solo rate. What differs from TGS, and why, is in
// docs/policies.md.
//
// Signal: each production job's rate of progress over a control period, divided by its solo rate.
// Progress is kernels completed (launches less the growth of the in-flight queue) where the shim
// publishes its in-flight count, else launches: a training or inference loop issues the same
// kernels every step, so either counts steps.
// Solo rate: learnt online from "clean" periods, in which no opportunistic work ran (none was
// present, or a short probe paused it); see update_solo() in tgs_estimator.cpp.
// Actuator: the opportunistic class's launches per second, split among its jobs by weight (in GPU
// time where the shims report busy time) and handed out per window.
#include <algorithm>
#include <map>

#include "catalog.h"
#include "class_sharing.h"
#include "share.h"
#include "tgs_estimator.h"

namespace gpushare::policies {
namespace {

using tgs::EstimatorSettings;
using tgs::ProductionJob;

const ParameterSpec kParameters[] = {
    {"target", 0.95, 0.5, 1.0, "fraction of its solo rate each production job must keep"},
    {"tolerance", 0.03, 0.005, 0.2,
     "band around the target: this far above is headroom (back to slow start); this far below "
     "earns the full decrease (TGS: 3 %)"},
    {"reset_deviation", 0.09, 0.02, 0.5,
     "production this far below target after slow start: limit / 10, slow start (TGS: 9 %)"},
    {"decrease", 0.2, 0.01, 0.9,
     "multiplicative decrease of the limit when production is below target by tolerance or more"},
    {"increase", 0.05, 0.001, 0.5, "increase of the limit per period, as a fraction of the limit"},
    {"control_period_ms", 200, 1, 10'000,
     "busy production time over which rates are measured and the limit moves once"},
    {"smoothing", 0.3, 0.05, 1.0,
     "weight of a new period in each production job's rate estimate, which the law compares with "
     "the target (1 uses the period alone, as TGS does)"},
    {"noise_margin", 1.5, 0, 10,
     "standard errors of the rate estimate (from the measured period-to-period noise) that a "
     "deviation must exceed before it counts as one; 0 trusts every sample"},
    {"start_fraction", 0.5, 0, 1,
     "slow start begins at this fraction of (1 - target) x the opportunistic class's rate seen "
     "while production idled (one launch per window until that is seen)"},
    {"probe_interval_ms", 5000, 0, 600'000,
     "longest busy production time without a clean sample before opportunistic work is paused for "
     "one window plus one period to re-measure solo rates; 0 never probes"},
    {"solo_samples", 5, 1, 32,
     "recent clean (or faster) periods whose median is each production job's solo rate", true},
    {"idle_windows", 4, 1, 100,
     "windows with every production job idle before opportunistic work runs unlimited", true},
    {"in_flight", 0, 0, 1024, "kernels each opportunistic job may have in flight; 0 is no bound",
     true},
};

// TGS divides its limit by 10 when the deviation reaches 3x its threshold, and uses 1.5 as the
// slow-start factor; kept as they are.
constexpr double kResetDivisor = 10;
constexpr double kSlowStartFactor = 1.5;
// An opportunistic class that does not use its limit gets at most this multiple of what it used.
constexpr double kUnusedLimitCap = 2;
// Periods in a row with production above target + tolerance before slow start resumes.
constexpr int kHeadroomPeriods = 3;
// Growth allowed to an opportunistic job that left part of its share unused while production idles
// (the `fair` policy's default headroom).
constexpr double kIdleHeadroom = 0.05;
// How fast the unthrottled opportunistic rate estimate forgets, per idle window.
constexpr double kPeakDecay = 0.05;
// The lowest limit a decrease or reset leaves, as a fraction of what the target leaves to the
// opportunistic class ((1 - target) x its scale, see opportunistic_scale()): 0.5 % of the scale at
// the default target. Resnet50 training on the H100 (~700 launches per step, ~26,000 launches/s
// alone) then still gets a step through every ~4 s, enough for the law to keep testing the limit,
// while costing production at most a tenth of its allowance when the scale is right.
constexpr double kFloorFraction = 0.1;

struct OpportunisticJob {
  LaunchCost cost;
  double carry = 0;         // fractional launches carried to the next window
  double rate = 0;          // launches/s in the last window
  bool backlogged = false;  // waited at the gate or had work queued at the end of the last window
};

enum class Phase { slow_start, congestion_avoidance };
enum class Probe { off, settling, measuring };

class TgsPolicy final : public Policy {
 public:
  explicit TgsPolicy(const Parameters& p)
      : target_(p.at("target")),
        tolerance_(p.at("tolerance")),
        reset_deviation_(p.at("reset_deviation")),
        decrease_(p.at("decrease")),
        increase_(p.at("increase")),
        control_period_ns_(static_cast<uint64_t>(p.at("control_period_ms") * 1e6)),
        probe_interval_ns_(static_cast<uint64_t>(p.at("probe_interval_ms") * 1e6)),
        noise_margin_(p.at("noise_margin")),
        start_fraction_(p.at("start_fraction")),
        idle_windows_needed_(static_cast<uint32_t>(p.at("idle_windows"))),
        in_flight_(static_cast<uint32_t>(p.at("in_flight"))),
        estimator_{.tolerance = tolerance_,
                   .smoothing = p.at("smoothing"),
                   .noise_margin = noise_margin_,
                   .solo_samples = static_cast<size_t>(p.at("solo_samples"))} {}

  std::string_view name() const override { return "tgs"; }
  std::optional<double> production_progress() const override { return progress_; }

  std::vector<Gate> decide(const DeviceObservation& device) override {
    window_s_ = window_seconds(device);
    const bool production_joined = track_jobs(device);
    idle_sharing_.observe(device);

    bool production_busy = false;
    for (const JobObservation& job : device.jobs)
      if (job.job_class == JobClass::production && !is_idle(job)) production_busy = true;
    idle_windows_ = production_busy ? 0 : std::min(idle_windows_ + 1, idle_windows_needed_);

    if (idle_windows_ >= idle_windows_needed_) {
      on_production_idle(device);
    } else if (production_idle_) {
      // Back from idle. This window ran opportunistic work unlimited and production only from
      // some point in it: measure nothing from it, but gate from now on.
      if (limit_ == 0) limit_ = (1 - target_) * opportunistic_peak_;
      production_idle_ = false;
    } else {
      // A busy window, or a gap shorter than idle_windows: a gap is part of production's pace.
      measure_window(device);
    }
    // A new production job changes what the others get alone: measure solo rates again. The
    // probe starts with the next window, the first one with opportunistic work paused.
    if (production_joined && !opportunistic_.empty()) start_probe();
    return gates(device);
  }

 private:
  // Adds new jobs, drops gone ones and records this window's opportunistic demand. Returns whether
  // a production job appeared (its arrival changes what the others can get: re-measure).
  bool track_jobs(const DeviceObservation& device) {
    std::map<uint64_t, OpportunisticJob> opportunistic;
    for (const JobObservation& job : device.jobs) {
      if (job.job_class == JobClass::opportunistic) {
        OpportunisticJob& state = opportunistic[job.job_id] = opportunistic_[job.job_id];
        state.cost.observe(job);
        state.rate = static_cast<double>(job.launches) / window_s_;
        state.backlogged = job.gate_waits > 0 || job.in_flight.value_or(0) > 0;
      }
    }
    opportunistic_ = std::move(opportunistic);
    return tgs::track_production(device, production_);
  }


  // Every production job idle for idle_windows: opportunistic work runs unlimited.
  void on_production_idle(const DeviceObservation& device) {
    if (opportunistic_unlimited_) {
      double rate = 0;
      for (const JobObservation& job : device.jobs)
        if (job.job_class == JobClass::opportunistic) rate += static_cast<double>(job.launches);
      opportunistic_peak_ = std::max(rate / window_s_, opportunistic_peak_ * (1 - kPeakDecay));
    }
    production_idle_ = true;
    previous_window_quiet_ = false;  // opportunistic work runs unlimited
    probe_ = Probe::off;  // an idle production job has nothing to measure
    for (auto& [id, job] : production_) job.rate_estimate = 0;  // its load may differ when back
    reset_period();
  }

  void measure_window(const DeviceObservation& device) {
    if (probe_ == Probe::settling) {
      // Opportunistic kernels queued before the pause ran in this window; measure from the next.
      probe_ = Probe::measuring;
      previous_window_quiet_ = true;  // the probe held every opportunistic launch
      reset_period();
      return;
    }
    uint64_t opportunistic_launches = 0;
    bool opportunistic_queued = false;
    bool queue_known = true;  // every opportunistic shim publishes its in-flight count
    for (const JobObservation& job : device.jobs) {
      if (job.job_class == JobClass::production) {
        production_[job.job_id].period_progress += production_[job.job_id].window_progress;
      } else {
        opportunistic_launches += job.launches;
        opportunistic_queued = opportunistic_queued || job.in_flight.value_or(0) > 0;
        queue_known = queue_known && job.in_flight.has_value();
        period_blocked_ = period_blocked_ || job.gate_waits > 0;
      }
    }
    // Clean: no opportunistic kernel can have run. Without an in-flight count, work launched in
    // the window before may still be queued on the GPU, so that window must have been quiet too
    // (held by the gate, or no launches). On the H100 a period merely gated to zero right after
    // a busy one measured production at half its solo rate, and three of those replaced the solo
    // rate with the contended one.
    const bool quiet =
        opportunistic_paused_ || (opportunistic_launches == 0 && !opportunistic_queued);
    const bool known_drained = queue_known ? !opportunistic_queued : previous_window_quiet_;
    period_clean_ = period_clean_ && quiet && known_drained;
    previous_window_quiet_ = quiet;
    period_opportunistic_launches_ += opportunistic_launches;
    period_ns_ += device.window_ns;
    if (period_ns_ >= control_period_ns_) end_period();
  }

  void end_period() {
    const double period_s = static_cast<double>(period_ns_) / kNsPerSecond;
    // A probe period says nothing about what the limit does to production.
    const bool probed = probe_ == Probe::measuring;
    probe_ = Probe::off;
    double slowest = kNoLimit;  // lowest estimated production rate / solo rate
    double slowest_error = 0;   // relative standard error of that estimate
    bool solo_missing = false;
    for (auto& [id, job] : production_) {
      if (job.period_progress == 0) continue;  // idle all period: says nothing
      const double rate = static_cast<double>(job.period_progress) / period_s;
      tgs::update_solo(job, rate, period_clean_, probed, estimator_);
      // A solo rate that no probe has confirmed yet came from a start-up period: probe now.
      solo_missing = solo_missing || job.solo_rate == 0 || !job.solo_probed;
      if (probed) continue;
      tgs::update_estimate(job, rate, estimator_);
      if (job.solo_rate > 0 && job.rate_estimate / job.solo_rate < slowest) {
        slowest = job.rate_estimate / job.solo_rate;
        slowest_error = tgs::standard_error(job, estimator_);
      }
    }
    busy_since_clean_ns_ = period_clean_ ? 0 : busy_since_clean_ns_ + period_ns_;
    if (!probed) progress_ = slowest != kNoLimit ? std::optional<double>(slowest) : std::nullopt;
    if (!probed && slowest != kNoLimit && !opportunistic_.empty())
      control(slowest, slowest_error,
              static_cast<double>(period_opportunistic_launches_) / period_s);
    reset_period();
    const bool probe_due = probe_interval_ns_ > 0 && busy_since_clean_ns_ >= probe_interval_ns_;
    if (!opportunistic_.empty() && (solo_missing || probe_due)) start_probe();
  }

  // Where slow start begins: a useful fraction of what the opportunistic class can use, where its
  // unthrottled rate is known, instead of TGS's one launch. Resnet50 training needs ~700 launches
  // per step, ~1300 per 50 ms window alone; from one launch per window ×1.5 per period it took
  // seconds to reach a single step, and every false reset started it over.
  double start_limit() const {
    double start = start_fraction_ * (1 - target_) * opportunistic_scale();
    if (too_high_limit_ > 0) start = std::min(start, too_high_limit_ / kSlowStartFactor);
    return std::max(start, 1 / window_s_);
  }

  // The control law (TGS update_rate_limit, with our target in place of TGS's solo rate). A
  // shortfall within `margin` (noise_margin standard errors) may be noise: it ends neither slow
  // start nor earns a reset, and it earns only part of the decrease.
  void control(double slowest, double error, double opportunistic_rate) {
    const double one_per_window = 1 / window_s_;
    const double floor =
        std::max(kFloorFraction * (1 - target_) * opportunistic_scale(), one_per_window);
    const double shortfall = (target_ - slowest) / target_;  // > 0: production below target
    const double margin = noise_margin_ * error;
    // A limit the opportunistic jobs do not use grows no further: when their demand returns it
    // must not find a limit far above what was last tested.
    const double cap =
        period_blocked_ ? kNoLimit
                        : std::max({limit_, kUnusedLimitCap * opportunistic_rate, one_per_window});
    if (phase_ == Phase::slow_start) {
      headroom_periods_ = 0;
      if (shortfall <= margin) {
        limit_ = std::min(std::max(limit_ * kSlowStartFactor, start_limit()), cap);
      } else {
        too_high_limit_ = limit_;
        limit_ /= kSlowStartFactor;
        phase_ = Phase::congestion_avoidance;
      }
    } else if (shortfall >= reset_deviation_ + margin) {
      too_high_limit_ = limit_;
      limit_ /= kResetDivisor;
      phase_ = Phase::slow_start;
      // The estimate remembers the periods before the reset: start measuring afresh.
      for (auto& [id, job] : production_) job.rate_estimate = 0;
    } else if (shortfall <= 0) {
      // Lasting headroom at a limit that was too high before means production's load fell: grow
      // fast again. Below that limit, headroom is just the last decrease (TCP's ssthresh).
      const bool headroom = -shortfall > tolerance_ + margin && limit_ >= too_high_limit_;
      headroom_periods_ = headroom ? headroom_periods_ + 1 : 0;
      if (headroom_periods_ >= kHeadroomPeriods) phase_ = Phase::slow_start;
      // At least `increase` of a fair opportunistic share per period: 5 % of a
      // limit that noise has driven down to a few launches per window takes minutes to recover.
      // Before that is known, the last limit found too high is the scale.
      const double step = std::max(
          {limit_, (1 - target_) * opportunistic_scale(), too_high_limit_, one_per_window});
      limit_ = std::min(limit_ + increase_ * step, cap);
    } else {
      // In proportion to the shortfall up to `tolerance`: a full decrease for a barely missed
      // target would swing production far above it when the opportunistic share is large.
      // The band widens with the noise, so that noise alone earns decreases no larger on average
      // than the increases it earns.
      too_high_limit_ = limit_;
      limit_ *= 1 - decrease_ * std::min(1.0, shortfall / (tolerance_ + margin));
    }
    // A reset from a small limit would otherwise leave a few launches per window, less than one
    // opportunistic step in many seconds: the law then sees no effect of its limit and recovers
    // only at the additive pace (seen on the H100 trace replay with smoothing 0.25 and 0.35).
    if (period_blocked_) limit_ = std::max(limit_, floor);
  }

  // The opportunistic class's launches per second alone, the scale of slow start, the additive
  // step and the floor: as seen while production idled, else, where the opportunistic jobs wait at
  // their gates (they would take more), the fastest production job's solo rate. Both are training
  // or inference loops issuing kernels; a proxy is better than TGS's one launch per window, from
  // which a job needing ~700 launches per step took seconds to see one step, and every reset
  // started it over.
  double opportunistic_scale() const {
    if (opportunistic_peak_ > 0) return opportunistic_peak_;
    if (!period_blocked_) return 0;
    double fastest = 0;
    for (const auto& [id, job] : production_) fastest = std::max(fastest, job.solo_rate);
    return fastest;
  }

  void start_probe() {
    probe_ = Probe::settling;
    reset_period();
  }

  void reset_period() {
    period_ns_ = 0;
    period_clean_ = true;
    period_blocked_ = false;
    period_opportunistic_launches_ = 0;
    for (auto& [id, job] : production_) job.period_progress = 0;
  }

  std::vector<Gate> gates(const DeviceObservation& device) {
    std::vector<Claim> claims;
    std::vector<double> costs;
    bool time_known = true;
    for (const auto& [id, job] : opportunistic_) time_known = time_known && job.cost.known();
    for (const JobObservation& job : device.jobs) {
      if (job.job_class != JobClass::opportunistic) continue;
      const OpportunisticJob& state = opportunistic_[job.job_id];
      // Launches in proportion to weight / cost are GPU time in proportion to weight.
      const double cost = time_known ? state.cost.ns_per_launch : 1.0;
      const double unused_cap = kUnusedLimitCap * state.rate * window_s_ + 1;
      claims.push_back({job.weight / cost, state.backlogged ? kNoLimit : unused_cap});
      costs.push_back(cost);
    }
    const std::vector<double> shares = split_by_weight(limit_ * window_s_, claims);

    std::vector<Gate> gates;
    gates.reserve(device.jobs.size());
    size_t k = 0;
    for (const JobObservation& job : device.jobs) {
      Gate gate{.job_id = job.job_id};
      if (job.job_class == JobClass::opportunistic) {
        gate.max_in_flight = in_flight_;
        if (probe_ != Probe::off && !production_idle_) {
          gate.paused = true;
        } else if (!production_idle_) {
          gate.launches = whole_launches(shares[k], opportunistic_[job.job_id].carry);
        }
        ++k;
      }
      gates.push_back(gate);
    }
    // While production idles the opportunistic jobs have the whole GPU, still shared by weight.
    if (production_idle_) idle_sharing_.share(device, JobClass::opportunistic, gates);
    bool all_held = k > 0;
    for (size_t i = 0; i < gates.size(); ++i)
      if (device.jobs[i].job_class == JobClass::opportunistic)
        all_held = all_held && (gates[i].paused || gates[i].launches == 0);
    opportunistic_paused_ = all_held;
    opportunistic_unlimited_ = production_idle_;
    return gates;
  }

  // Parameters.
  const double target_, tolerance_, reset_deviation_, decrease_, increase_;
  const uint64_t control_period_ns_, probe_interval_ns_;
  const double noise_margin_, start_fraction_;
  const uint32_t idle_windows_needed_, in_flight_;
  const EstimatorSettings estimator_;
  std::optional<double> progress_;  // slowest production estimate / solo rate, last period

  // Control state.
  Phase phase_ = Phase::slow_start;
  int headroom_periods_ = 0;
  double too_high_limit_ = 0;  // the last limit that pushed production below target
  double limit_ = 0;  // opportunistic launches/s while production is busy; kept across idle phases
  double opportunistic_peak_ = 0;  // opportunistic class launches/s seen while unthrottled
  bool production_idle_ = false;   // every production job idle: opportunistic work unlimited
  uint32_t idle_windows_ = 0;
  Probe probe_ = Probe::off;
  uint64_t busy_since_clean_ns_ = 0;
  double window_s_ = 0;

  // What the last gates did, which the next window's counts reflect.
  bool opportunistic_paused_ = false;
  // Whether the last measured window had no opportunistic work launched or released.
  bool previous_window_quiet_ = false;
  bool opportunistic_unlimited_ = false;

  // The measurement period in progress.
  uint64_t period_ns_ = 0;
  bool period_clean_ = true;
  bool period_blocked_ = false;
  uint64_t period_opportunistic_launches_ = 0;

  std::map<uint64_t, ProductionJob> production_;
  std::map<uint64_t, OpportunisticJob> opportunistic_;
  ClassSharing idle_sharing_{kIdleHeadroom};
};

}  // namespace

std::span<const ParameterSpec> tgs_parameters() {
  return kParameters;
}

std::unique_ptr<Policy> make_tgs(const Parameters& resolved) {
  return std::make_unique<TgsPolicy>(resolved);
}

}  // namespace gpushare::policies
