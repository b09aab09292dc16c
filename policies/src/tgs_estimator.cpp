#include "tgs_estimator.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "median.h"

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
  if (job.completed) return *job.completed;
  if (!job.in_flight || !in_flight_before) return job.launches;
  const int64_t completed = static_cast<int64_t>(job.launches) + *in_flight_before - *job.in_flight;
  return completed > 0 ? static_cast<uint64_t>(completed) : 0;
}

bool track_production(const DeviceObservation& device, std::map<uint64_t, ProductionJob>& jobs) {
  std::map<uint64_t, ProductionJob> seen;
  bool joined = false;
  for (const JobObservation& job : device.jobs) {
    if (job.job_class != JobClass::production) continue;
    auto known = jobs.find(job.job_id);
    joined = joined || known == jobs.end();
    ProductionJob& state = seen[job.job_id] = known == jobs.end() ? ProductionJob{} : known->second;
    state.window_progress = progress(job, state.in_flight);
    state.in_flight = job.in_flight;
  }
  jobs = std::move(seen);
  return joined;
}

// The solo rate is the median of the last `solo_samples` samples that can show it: clean periods
// (no opportunistic work ran; a probe is one) and periods faster than the estimate by more than
// `tolerance` plus the noise (contention only slows production, so such a sample means the
// estimate is stale). A median, because every single sample lied on the H100 (2026-11-23):
// - a start-up period that happened to be clean: production ramping up, at 2 % of its solo rate;
// - one transient period 18 % above the steady rate (resnet50 b8, S1b under MPS), which replaced
//   the estimate and made production look 0.85 of solo with the opportunistic job at ~0: the law
//   then held it at its floor for the whole run;
// - averaging a clean sample into the estimate (weight 0.3) took three probes, 15 s, to undo that.
// A running maximum is biased upwards by noise (see docs/policies.md). The median follows a lasting
// change (the job's work got heavier or lighter) once half the recent samples show it, which TGS
// does by re-profiling after 20 samples 12 % off.
void update_solo(ProductionJob& job, double rate, bool clean, bool probed,
                 const EstimatorSettings& settings) {
  const double noise = settings.noise_margin * std::sqrt(job.noise_variance);
  const bool faster = job.solo_rate > 0 && rate > job.solo_rate * (1 + settings.tolerance + noise);
  if (probed) job.solo_probed = true;
  if (!clean && !faster) return;
  const size_t capacity = std::clamp<size_t>(settings.solo_samples, 1, job.solo_history.size());
  job.solo_history[job.solo_next % capacity] = rate;
  ++job.solo_next;
  const size_t count = std::min(job.solo_next, capacity);
  job.solo_rate = median(job.solo_history.begin(),
                         job.solo_history.begin() + static_cast<std::ptrdiff_t>(count));
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
