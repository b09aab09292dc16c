#include "tgs_estimator.h"

#include <algorithm>
#include <cmath>

namespace gpushare::policies::tgs {
namespace {

// Weight of a new period in the estimate of production's period-to-period noise (variance): it
// needs more samples than the rate itself.
constexpr double kNoiseSmoothing = 0.1;
// The largest relative deviation of one period that the noise estimate takes in. A start-up
// period (production ramping up: 716 kernels/s, then 16,363) or a reset is not noise: on the
// H100 (2026-11-23, S1 under tgs) one such step made the variance 50, the margin 1.5 x 2.9, and
// for seconds no shortfall could exceed it, so slow start grew the limit without bound and
// production fell to 0.58 of solo. Clipped, one outlier adds at most 0.1 x 0.25^2 to the variance.
constexpr double kMaxNoiseDeviation = 0.25;

}  // namespace

uint64_t progress(const JobObservation& job, std::optional<uint32_t> in_flight_before) {
  if (!job.in_flight || !in_flight_before) return job.launches;
  const int64_t completed = static_cast<int64_t>(job.launches) + *in_flight_before - *job.in_flight;
  return completed > 0 ? static_cast<uint64_t>(completed) : 0;
}

// Contention only slows production down, so a sample above the estimate by more than noise
// (`tolerance`) means the estimate is stale, clean or not. Clean samples within `drift` of the
// estimate are averaged in: a running maximum would be biased upwards by noise, and a solo rate
// too high starves the opportunistic jobs. Clean samples far below it, `drift_periods` in a row,
// replace it: the job's work got heavier (TGS re-profiles after 20 samples 12 % off).
// Both thresholds widen by noise_margin sampling errors of one period: on the H100 (resnet50
// training, data/h100-s1-tgs-mps-ticks.txt) one period's rate varies by 8 % with no contention at
// all, and replacing the estimate with every sample 3 % above it ratcheted it up to the noise's
// peaks, so that production looked 10-20 % short of target all the time.
//
// A probe's sample is trusted more: above the estimate by more than `tolerance` it replaces it
// (the estimate came from a start-up period or from a heavier phase), and the first probe of a
// job replaces whatever a start-up period left (on the H100 the first clean period was production
// ramping up, at 2 % of its real solo rate).
void update_solo(ProductionJob& job, double rate, bool clean, bool probed,
                 const EstimatorSettings& settings) {
  const double noise = settings.noise_margin * std::sqrt(job.noise_variance);
  const bool faster =
      rate > job.solo_rate * (1 + (clean ? settings.drift : settings.tolerance) + noise);
  const bool trusted_replacement =
      probed && (!job.solo_probed || rate > job.solo_rate * (1 + settings.tolerance));
  if (probed) job.solo_probed = true;
  if (trusted_replacement || (job.solo_rate == 0 ? clean : faster)) {
    job.solo_rate = rate;
    job.low_clean_samples = 0;
  } else if (!clean) {
    return;
  } else if (rate < job.solo_rate * (1 - settings.drift - noise)) {
    if (++job.low_clean_samples >= settings.drift_periods) {
      job.solo_rate = rate;
      job.low_clean_samples = 0;
    }
  } else {
    job.low_clean_samples = 0;
    job.solo_rate += settings.solo_smoothing * (rate - job.solo_rate);
  }
}

void update_estimate(ProductionJob& job, double rate, const EstimatorSettings& settings) {
  if (job.rate_estimate <= 0) {
    job.rate_estimate = rate;
    return;
  }
  const double deviation =
      std::clamp((rate - job.rate_estimate) / job.rate_estimate, -kMaxNoiseDeviation, kMaxNoiseDeviation);
  job.noise_variance += kNoiseSmoothing * (deviation * deviation - job.noise_variance);
  job.rate_estimate += settings.smoothing * (rate - job.rate_estimate);
}

double standard_error(const ProductionJob& job, const EstimatorSettings& settings) {
  return std::sqrt(job.noise_variance * settings.smoothing / (2 - settings.smoothing));
}

}  // namespace gpushare::policies::tgs
