// What `tgs` knows of each production job: its progress per window, its solo rate (learnt online
// from clean periods) and a smoothed estimate of its rate under control with the period-to-period
// noise around it. The control law in tgs.cpp compares the two; this file only measures.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "gpushare/policies/policy.h"

namespace gpushare::policies::tgs {

inline constexpr size_t kMaxSoloSamples = 32;

struct ProductionJob {
  double solo_rate = 0;  // kernels/s without opportunistic work; 0 until first measured
  std::optional<uint32_t> in_flight;  // at the end of the last window, where the shim tracks it
  uint64_t window_progress = 0;       // kernels completed in the last window (see progress())
  uint64_t period_progress = 0;
  // The recent samples the solo rate is the median of (see update_solo), a ring.
  std::array<double, kMaxSoloSamples> solo_history{};
  size_t solo_next = 0;  // samples taken so far; the next goes to solo_next % solo_samples
  // The solo rate came from a probe (opportunistic work paused while production was busy), not
  // from a start-up period that happened to be clean: only a probe's sample is trusted.
  bool solo_probed = false;
  // Smoothed progress rate (kernels/s) of the periods under control; 0 until the next sample.
  double rate_estimate = 0;
  // Relative variance of one period's rate around rate_estimate: the measured noise.
  double noise_variance = 0;
};

// The `tgs` parameters of the same names (see kParameters in tgs.cpp).
struct EstimatorSettings {
  double tolerance = 0;
  double smoothing = 0;
  double noise_margin = 0;
  size_t solo_samples = 0;
};

// Production's progress in a window: the kernels it completed as its shim's completion marks tell
// (JobObservation::completed), else its launches less the
// growth of its queue where the shim publishes the in-flight count. Launches alone arrive in bursts
// (a training step queues its kernels in a few ms, then waits for them), so per-window launch
// counts swing by a whole step; completions follow the GPU and do not.
uint64_t progress(const JobObservation& job, std::optional<uint32_t> in_flight_before);

// Follows the production jobs of `device`: a job seen before keeps its state, a new one starts
// empty, a gone one is dropped; each gets this window's progress. Returns whether one is new (its
// arrival changes what the others can get: the policies re-measure). Shared by `tgs` and
// `harvest`.
bool track_production(const DeviceObservation& device, std::map<uint64_t, ProductionJob>& jobs);

// Learns the solo rate from one period's `rate`; `clean`: no opportunistic work ran in the period;
// `probed`: the period was a probe (the policy paused opportunistic work to measure).
void update_solo(ProductionJob& job, double rate, bool clean, bool probed,
                 const EstimatorSettings& settings);

// Production's rate as the law sees it: an exponential average of its periods, and the
// period-to-period noise around it. TGS compares single samples with its bands; with the noise
// of the H100 trace that fired a decrease or a reset (limit / 10) every few periods.
void update_estimate(ProductionJob& job, double rate, const EstimatorSettings& settings);

// Relative standard error of the rate estimate: an exponential average of independent samples
// of variance v has variance v * a / (2 - a).
double standard_error(const ProductionJob& job, const EstimatorSettings& settings);

}  // namespace gpushare::policies::tgs
