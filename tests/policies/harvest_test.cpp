// The `harvest` policy driven by the shared-GPU model (time-sliced, 50 ms ticks, 200 ms periods).
#include <gtest/gtest.h>

#include "shared_gpu_model.h"

namespace gpushare::policies {
namespace {

using testing::mean;
using testing::ModelJob;
using testing::production_per_period;
using testing::run;
using testing::SharedGpuModel;

constexpr int kTicksPerSecond = 20;
constexpr double kTarget = 0.95;

std::unique_ptr<Policy> harvest(const Parameters& parameters = {}) {
  auto made = make_policy("harvest", parameters);
  EXPECT_TRUE(made.policy) << made.error;
  return std::move(made.policy);
}

ModelJob production(uint64_t id, double demand = 1) {
  return {.id = id, .job_class = JobClass::production, .demand = demand, .ns_per_launch = 100'000};
}
ModelJob opportunistic(uint64_t id) {
  return {.id = id, .job_class = JobClass::opportunistic, .ns_per_launch = 200'000};
}

bool throttled(const ModelJob& job) { return job.gate.paused || job.gate.launches != kUnlimited; }

// The opposite of tgs's slow start: nothing is held back until a shortfall is measured. The only
// pauses are the probes of production's solo rate: one window plus one period each, every second
// until three probes agree, then every 5 s.
TEST(Harvest, StartsUnthrottledAndOnlyProbes) {
  SharedGpuModel gpu({production(1, 0.3), opportunistic(2)});
  auto policy = harvest();
  auto count = [&](int seconds, int& paused, int& limited) {
    for (int t = 0; t < seconds * kTicksPerSecond; ++t) {
      gpu.tick(*policy);
      paused += gpu.job(2).gate.paused ? 1 : 0;
      limited += !gpu.job(2).gate.paused && gpu.job(2).gate.launches != kUnlimited ? 1 : 0;
    }
  };
  int paused = 0, limited = 0;
  count(4, paused, limited);
  EXPECT_LE(paused, 3 * 5);
  EXPECT_EQ(limited, 0);
  paused = 0;
  count(10, paused, limited);
  EXPECT_LE(paused, 2 * 5);  // 5 % of the time
  EXPECT_EQ(limited, 0);
}

// Production that leaves the GPU partly idle keeps its whole rate beside an unthrottled job, so
// the opportunistic job keeps everything production leaves, probes aside (5 % of the time).
TEST(Harvest, GappyProductionLeavesTheRestToTheOpportunisticJob) {
  SharedGpuModel gpu({production(1, 0.4), opportunistic(2)});
  auto policy = harvest();
  run(gpu, *policy, 2 * kTicksPerSecond, 1);
  EXPECT_GE(mean(run(gpu, *policy, 20 * kTicksPerSecond, 2)), 0.9 * 0.6);
  EXPECT_NEAR(mean(run(gpu, *policy, 10 * kTicksPerSecond, 1)), 0.4, 0.01);
}

// A saturating production job loses half its rate to an unthrottled one under time-slicing: the
// law measures the shortfall and throttles until production is back at target.
TEST(Harvest, SaturatingProductionIsBroughtBackToTarget) {
  SharedGpuModel gpu({production(1), opportunistic(2)});
  auto policy = harvest();
  run(gpu, *policy, 10 * kTicksPerSecond, 1);
  const auto periods = production_per_period(gpu, *policy, 20 * kTicksPerSecond);
  EXPECT_GE(mean(periods), kTarget - 0.02);
  EXPECT_LE(mean(periods), 1.0);
  // The opportunistic job still gets part of the 5 % the target leaves.
  EXPECT_GE(mean(run(gpu, *policy, 10 * kTicksPerSecond, 2)), 0.3 * (1 - kTarget));
}

TEST(Harvest, NoisyCountsStillKeepProductionNearTarget) {
  ModelJob noisy = production(1);
  noisy.noise = 0.05;
  SharedGpuModel gpu({noisy, opportunistic(2)});
  auto policy = harvest();
  run(gpu, *policy, 10 * kTicksPerSecond, 1);
  EXPECT_GE(mean(production_per_period(gpu, *policy, 20 * kTicksPerSecond)), kTarget - 0.03);
}

// Production goes idle: within idle_windows (3 x 50 ms) the opportunistic job runs unlimited; when
// production is back, the limit it had before applies from the next window (it gives way within
// 200 ms) and no probe is needed (its solo rate is kept).
TEST(Harvest, YieldsWithinTwoHundredMillisecondsBothWays) {
  SharedGpuModel gpu({production(1), opportunistic(2)});
  auto policy = harvest();
  run(gpu, *policy, 10 * kTicksPerSecond, 1);
  gpu.job(1).demand = 0;
  run(gpu, *policy, 3, 1);
  const auto idle = run(gpu, *policy, 2 * kTicksPerSecond, 2);
  for (double share : idle) EXPECT_DOUBLE_EQ(share, 1.0);
  gpu.job(1).demand = 1;
  const auto back = run(gpu, *policy, 4, 1);
  EXPECT_GE(back[1], kTarget - 0.03);
  EXPECT_GE(back[2], kTarget - 0.03);
  EXPECT_GE(back[3], kTarget - 0.03);
}

// The limit is lifted again once production's load falls and the class no longer uses it.
TEST(Harvest, ALimitThatNoLongerHoldsIsLifted) {
  SharedGpuModel gpu({production(1), opportunistic(2)});
  auto policy = harvest();
  run(gpu, *policy, 10 * kTicksPerSecond, 1);
  ASSERT_TRUE(throttled(gpu.job(2)));
  gpu.job(1).demand = 0.3;
  run(gpu, *policy, 15 * kTicksPerSecond, 1);
  EXPECT_GE(mean(run(gpu, *policy, 10 * kTicksPerSecond, 2)), 0.9 * 0.7);
}

TEST(Harvest, IsTheRegistrysAndTakesItsParameters) {
  EXPECT_TRUE(make_policy("harvest", {{"target", 0.9}, {"in_flight", 4}}).policy);
  EXPECT_NE(make_policy("harvest", {{"target", 2}}).error.find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::policies
