// The `priority` policy: opportunistic work only in production's idle gaps, with a short queue.
#include <gtest/gtest.h>

#include "shared_gpu_model.h"

namespace gpushare::policies {
namespace {

using testing::ModelJob;
using testing::SharedGpuModel;

std::unique_ptr<Policy> priority(const Parameters& parameters = {}) {
  auto made = make_policy("priority", parameters);
  EXPECT_TRUE(made.policy) << made.error;
  return std::move(made.policy);
}

ModelJob job(uint64_t id, JobClass job_class, double demand = 1) {
  return {.id = id, .job_class = job_class, .demand = demand};
}

bool released(const Gate& gate) {
  return !gate.paused && gate.launches == kUnlimited;
}

TEST(Priority, HoldsOpportunisticWorkWhileProductionIsBusy) {
  SharedGpuModel gpu({job(1, JobClass::production), job(2, JobClass::opportunistic)});
  auto policy = priority();
  for (int t = 0; t < 20; ++t) {
    gpu.tick(*policy);
    EXPECT_TRUE(gpu.job(2).gate.paused);
    EXPECT_FALSE(gpu.job(1).gate.paused);
    EXPECT_EQ(gpu.job(1).gate.launches, kUnlimited);
  }
  EXPECT_DOUBLE_EQ(gpu.job(1).share, 1.0);
}

TEST(Priority, ReleasesOpportunisticWorkAfterTheMinimumIdleTimeWithAShortQueue) {
  SharedGpuModel gpu({job(1, JobClass::production), job(2, JobClass::opportunistic)});
  auto policy = priority({{"min_idle_ms", 100}, {"in_flight", 3}});  // two 50 ms windows
  for (int t = 0; t < 5; ++t) gpu.tick(*policy);
  gpu.job(1).demand = 0;
  gpu.tick(*policy);
  EXPECT_TRUE(gpu.job(2).gate.paused) << "one idle window is 50 ms, less than min_idle_ms";
  gpu.tick(*policy);
  EXPECT_TRUE(released(gpu.job(2).gate));
  EXPECT_EQ(gpu.job(2).gate.max_in_flight, 3u);
  gpu.tick(*policy);
  EXPECT_DOUBLE_EQ(gpu.job(2).share, 1.0);
}

TEST(Priority, ProductionBurstAfterIdleIsAnsweredWithinTwoTicks) {
  SharedGpuModel gpu({job(1, JobClass::production, 0), job(2, JobClass::opportunistic)});
  auto policy = priority();
  for (int t = 0; t < 20; ++t) gpu.tick(*policy);
  EXPECT_DOUBLE_EQ(gpu.job(2).share, 1.0);
  gpu.job(1).demand = 1;
  gpu.tick(*policy);  // tick 1 of the burst ran under the idle-time gates
  EXPECT_TRUE(gpu.job(2).gate.paused);
  gpu.tick(*policy);
  EXPECT_DOUBLE_EQ(gpu.job(1).share, 1.0);
}

TEST(Priority, QueuedProductionKernelsAreNotAGap) {
  auto policy = priority({{"min_idle_ms", 0}});
  DeviceObservation device{.now_ns = 0, .window_ns = 50'000'000};
  device.jobs = {{.job_id = 1, .job_class = JobClass::production, .launches = 0, .in_flight = 1},
                 {.job_id = 2, .job_class = JobClass::opportunistic, .launches = 0}};
  EXPECT_TRUE(policy->decide(device)[1].paused);
  device.jobs[0].in_flight = 0;
  EXPECT_TRUE(released(policy->decide(device)[1]));
}

TEST(Priority, SeveralJobsOfEachClass) {
  SharedGpuModel gpu({job(1, JobClass::production), job(2, JobClass::production, 0),
                      job(3, JobClass::opportunistic), job(4, JobClass::opportunistic)});
  auto policy = priority();
  for (int t = 0; t < 5; ++t) gpu.tick(*policy);
  EXPECT_TRUE(gpu.job(3).gate.paused) << "one busy production job is enough to hold them";
  EXPECT_TRUE(gpu.job(4).gate.paused);
  gpu.job(1).demand = 0;
  gpu.tick(*policy);
  EXPECT_TRUE(released(gpu.job(3).gate));
  EXPECT_TRUE(released(gpu.job(4).gate));
  // From the next window on, they share the gaps by weight (1 : 3) and leave none of it idle.
  gpu.job(4).weight = 3;
  double light = 0, heavy = 0;
  for (int t = 0; t < 100; ++t) {
    gpu.tick(*policy);
    EXPECT_FALSE(gpu.job(3).gate.paused);
    EXPECT_GT(gpu.job(3).share + gpu.job(4).share, 0.95);
    light += gpu.job(3).share;
    heavy += gpu.job(4).share;
  }
  EXPECT_NEAR(heavy / light, 3.0, 0.5);
}

TEST(Priority, NoProductionJobMeansNoGate) {
  SharedGpuModel gpu({job(2, JobClass::opportunistic)});
  auto policy = priority();
  gpu.tick(*policy);
  EXPECT_TRUE(released(gpu.job(2).gate));
}

}  // namespace
}  // namespace gpushare::policies
