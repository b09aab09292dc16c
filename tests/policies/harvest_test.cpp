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
  EXPECT_TRUE(make_policy("harvest", {{"concurrency", 2}, {"cost_samples", 48}}).policy);
  // Fewer than doubt_samples' largest value (16) would leave a doubt never lifted.
  const std::string refused = make_policy("harvest", {{"cost_samples", 8}}).error;
  EXPECT_NE(refused.find("cost_samples"), std::string::npos) << refused;
  EXPECT_NE(refused.find("out of range"), std::string::npos) << refused;
}

}  // namespace
}  // namespace gpushare::policies

namespace gpushare::policies {
namespace {

// One window (50 ms unless given) of a production job busy `busy` of the time (as the daemon's idle
// relay reports it, in_flight_ns) beside a backlogged opportunistic job.
DeviceObservation window_with_production_busy(uint64_t now_ns, double busy,
                                              uint64_t window_ns = 50'000'000) {
  DeviceObservation d{.now_ns = now_ns, .window_ns = window_ns};
  d.jobs.push_back({.job_id = 1,
                    .job_class = JobClass::production,
                    .launches = 100,
                    .completed = 100,
                    .in_flight_ns = static_cast<uint64_t>(busy * static_cast<double>(window_ns))});
  d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 50,
                    .gate_waits = 10});
  return d;
}

// Production leaving gaps: the opportunistic job is idle-gated (it runs whenever production has
// nothing in flight), never paused for a probe nor rate-limited.
TEST(HarvestKernelGating, GapsAreFilledByGatingNotByTheLaw) {
  auto made = make_policy("harvest", {{"kernel_gating", 1}, {"in_flight", 8}});
  ASSERT_TRUE(made.policy) << made.error;
  for (int t = 0; t < 20 * 20; ++t) {
    const std::vector<Gate> gates =
        made.policy->decide(window_with_production_busy(t * 50'000'000ull, 0.3));
    ASSERT_EQ(gates.size(), 2u);
    EXPECT_FALSE(gates[0].production_idle_only);  // production is never gated
    EXPECT_TRUE(gates[1].production_idle_only) << "tick " << t;
    EXPECT_FALSE(gates[1].paused) << "tick " << t;
    EXPECT_EQ(gates[1].launches, kUnlimited) << "tick " << t;
    EXPECT_EQ(gates[1].max_in_flight, 8u);
  }
}

// Production with work in flight all the time leaves no gaps: after one gated control period the
// opportunistic job runs beside it under the law, and after gating_retry_ms one period measures
// the gaps again.
TEST(HarvestKernelGating, SaturatingProductionHandsOverToTheLawAndIsRemeasured) {
  auto made = make_policy("harvest", {{"kernel_gating", 1}, {"gating_retry_ms", 2000}});
  ASSERT_TRUE(made.policy) << made.error;
  auto gated_at = [&](int tick) {
    return made.policy->decide(window_with_production_busy(tick * 50'000'000ull, 1.0))[1]
        .production_idle_only;
  };
  EXPECT_TRUE(gated_at(0));
  int first_ungated = -1;
  for (int t = 1; t < 20 && first_ungated < 0; ++t)
    if (!gated_at(t)) first_ungated = t;
  ASSERT_GE(first_ungated, 0) << "still gating after a second of saturated production";
  EXPECT_LE(first_ungated, 6);  // one 200 ms period (4 windows) after the relay's first sample
  int regated = -1;
  for (int t = first_ungated + 1; t < first_ungated + 60 && regated < 0; ++t)
    if (gated_at(t)) regated = t;
  ASSERT_GE(regated, 0);
  EXPECT_NEAR(regated - first_ungated, 40, 1);  // 2 s of 50 ms windows
}

// The law's probe of production's solo rate: one settling window, then one control period in
// whole windows (harvest.cpp, `reached`), whether the daemon's windows run short or long.
TEST(Harvest, AProbeLastsAWindowAndAPeriodInWholeWindows) {
  auto probe_windows = [](uint64_t window_ns) {
    auto policy = harvest();
    int paused = 0;
    for (int t = 0; t < 20; ++t) {
      const bool held =
          policy->decide(window_with_production_busy(t * window_ns, 1.0, window_ns))[1].paused;
      if (held)
        ++paused;
      else if (paused > 0)
        break;
    }
    return paused;
  };
  EXPECT_EQ(probe_windows(50'000'000), 1 + 4);
  EXPECT_EQ(probe_windows(50'000'000 - 20'000), 1 + 4);
  EXPECT_EQ(probe_windows(50'000'000 + 20'000), 1 + 4);
}

// Kernel gating's control period, which measures production's gaps, ends on whole windows too:
// the daemon's 50 ms windows run some microseconds either side of the tick, and counted in
// nanoseconds four windows 20 us short fell short of 200 ms, so the period ran five.
TEST(HarvestKernelGating, TheControlPeriodLastsItsLengthInWholeWindows) {
  auto first_ungated = [](uint64_t window_ns) {
    auto made = make_policy("harvest", {{"kernel_gating", 1}});
    EXPECT_TRUE(made.policy) << made.error;
    for (int t = 0; t < 20; ++t)
      if (!made.policy->decide(window_with_production_busy(t * window_ns, 1.0, window_ns))[1]
               .production_idle_only)
        return t;
    return -1;
  };
  const int exact = first_ungated(50'000'000);
  ASSERT_GE(exact, 0);
  EXPECT_EQ(first_ungated(50'000'000 - 20'000), exact);  // 20 us short
  EXPECT_EQ(first_ungated(50'000'000 + 20'000), exact);  // 20 us long
}

TEST(HarvestKernelGating, NeedsTheGateFromTheSystem) {
  EXPECT_FALSE(make_policy("harvest", {{"kernel_gating", 1}}, {.kernel_idle_gating = false}).policy);
  EXPECT_TRUE(make_policy("harvest", {{"kernel_gating", 0}}, {.kernel_idle_gating = false}).policy);
}

}  // namespace
}  // namespace gpushare::policies
