// tgs's measurements (policies/src/tgs_estimator.h) against the sample series that fooled them on
// the H100 (2026-11-23, docs/benchmarks.md §4b): a start-up step taken as noise, a clean start-up
// period at 2 % of the real rate, one transient period above the steady rate.
#include "tgs_estimator.h"

#include <gtest/gtest.h>

namespace gpushare::policies::tgs {
namespace {

EstimatorSettings defaults() {
  return {.tolerance = 0.03, .smoothing = 0.3, .noise_margin = 1.5, .solo_samples = 5};
}

// The first S1 run of the noise-aware law: 716 kernels/s while production ramped up, then
// 16,363. Unclipped, that one step made the relative variance ~50 and the margin swallowed every
// shortfall for seconds. Clipped, one step adds at most 0.1 x 0.25^2.
TEST(TgsEstimator, AStartUpStepIsNotTakenAsNoise) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  update_estimate(job, 716, s);
  update_estimate(job, 16'363, s);
  EXPECT_LE(job.noise_variance, 0.1 * 0.25 * 0.25 + 1e-12);
  EXPECT_LT(standard_error(job, s), 0.04);
}

// Steady noise still widens the band: ±8 % per period gives a variance near 0.0064.
TEST(TgsEstimator, SteadyNoiseIsMeasured) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  for (int i = 0; i < 200; ++i) update_estimate(job, i % 2 ? 37'000 * 1.08 : 37'000 * 0.92, s);
  EXPECT_GT(job.noise_variance, 0.003);
  EXPECT_LT(job.noise_variance, 0.02);
}

// A clean start-up period (production ramping up) is outvoted by the next clean samples.
TEST(TgsEstimator, AStartUpSoloSampleIsOutvoted) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  update_solo(job, 716, /*clean=*/true, /*probed=*/false, s);
  EXPECT_EQ(job.solo_rate, 716);
  for (double rate : {36'000.0, 37'000.0}) update_solo(job, rate, true, false, s);
  EXPECT_EQ(job.solo_rate, 36'000);  // median of 716, 36,000, 37,000
}

// S1b under MPS: one transient period 18 % above the steady rate (44,110 against ~37,500) had
// replaced the estimate, and production looked 0.85 of solo with nothing beside it.
TEST(TgsEstimator, OneTransientPeriodDoesNotMoveTheSoloRate) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  for (double rate : {37'200.0, 37'900.0, 37'500.0, 37'300.0}) update_solo(job, rate, true, false, s);
  const double before = job.solo_rate;
  update_solo(job, 44'110, /*clean=*/false, false, s);  // faster than solo: counted as a sample
  EXPECT_NEAR(job.solo_rate, before, 0.02 * before);
  EXPECT_LT(job.solo_rate, 38'000);
}

// A lasting change of the job's load moves the median once half the recent samples show it.
TEST(TgsEstimator, ALastingDropIsFollowedWithinThreeCleanSamples) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  for (int i = 0; i < 5; ++i) update_solo(job, 30'000, true, false, s);
  update_solo(job, 20'000, true, false, s);
  update_solo(job, 20'000, true, false, s);
  EXPECT_EQ(job.solo_rate, 30'000);
  update_solo(job, 20'000, true, false, s);
  EXPECT_EQ(job.solo_rate, 20'000);
}

// A contended period that is not faster says nothing about the solo rate.
TEST(TgsEstimator, AContendedPeriodIsIgnored) {
  ProductionJob job;
  const EstimatorSettings s = defaults();
  update_solo(job, 30'000, true, false, s);
  update_solo(job, 15'000, /*clean=*/false, false, s);
  EXPECT_EQ(job.solo_rate, 30'000);
  EXPECT_FALSE(job.solo_probed);
  update_solo(job, 31'000, true, /*probed=*/true, s);
  EXPECT_TRUE(job.solo_probed);
}

}  // namespace
}  // namespace gpushare::policies::tgs
