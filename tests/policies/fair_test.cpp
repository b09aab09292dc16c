// The `fair` policy: weighted max-min share among jobs of one class.
#include <gtest/gtest.h>

#include "shared_gpu_model.h"

namespace gpushare::policies {
namespace {

using testing::ModelJob;
using testing::SharedGpuModel;

std::unique_ptr<Policy> fair() {
  auto made = make_policy("fair");
  EXPECT_TRUE(made.policy) << made.error;
  return std::move(made.policy);
}

ModelJob opportunistic(uint64_t id, double weight, double ns_per_launch, bool report_busy) {
  return {.id = id,
          .job_class = JobClass::opportunistic,
          .weight = weight,
          .ns_per_launch = ns_per_launch,
          .report_busy = report_busy};
}

// Mean GPU share of jobs 1 and 2 over `ticks` ticks after `warmup` ticks.
std::pair<double, double> shares(SharedGpuModel& gpu, Policy& policy, int warmup = 40,
                                 int ticks = 200) {
  for (int t = 0; t < warmup; ++t) gpu.tick(policy);
  double first = 0, second = 0;
  for (int t = 0; t < ticks; ++t) {
    gpu.tick(policy);
    first += gpu.job(1).share / ticks;
    second += gpu.job(2).share / ticks;
  }
  return {first, second};
}

TEST(Fair, SplitsGpuTimeByWeightWhateverTheKernelLengths) {
  // Time-slicing alone gives 1/2 + 1/2; weights 1 : 3 ask for 1/4 + 3/4.
  SharedGpuModel gpu({opportunistic(1, 1, 100'000, true), opportunistic(2, 3, 1'000'000, true)});
  auto policy = fair();
  const auto [light, heavy] = shares(gpu, *policy);
  EXPECT_NEAR(light, 0.25, 0.04);
  EXPECT_NEAR(heavy, 0.75, 0.04);
  EXPECT_GT(light + heavy, 0.95) << "the split must not leave the GPU idle";
}

TEST(Fair, WithoutBusyTimeSplitsLaunchesByWeight) {
  SharedGpuModel gpu({opportunistic(1, 1, 100'000, false), opportunistic(2, 3, 100'000, false)});
  auto policy = fair();
  for (int t = 0; t < 40; ++t) gpu.tick(*policy);
  double light = 0, heavy = 0;
  for (int t = 0; t < 200; ++t) {
    const DeviceObservation device = gpu.step();
    light += static_cast<double>(device.jobs[0].launches);
    heavy += static_cast<double>(device.jobs[1].launches);
    gpu.apply(policy->decide(device));
  }
  // Counted in launches, the class's budget is what it used plus 5 % headroom, and the job held at
  // the gate gets its quarter of that: 1.05 / 4 against 1 - 1.05 / 4, a ratio of 2.8.
  EXPECT_NEAR(heavy / light, 2.8, 0.2);
}

TEST(Fair, AJobThatWantsLessLeavesTheRestToOthers) {
  ModelJob modest = opportunistic(2, 3, 100'000, true);
  modest.demand = 0.1;
  SharedGpuModel gpu({opportunistic(1, 1, 100'000, true), modest});
  auto policy = fair();
  const auto [greedy, small] = shares(gpu, *policy);
  EXPECT_NEAR(small, 0.1, 0.01);
  EXPECT_GT(greedy, 0.85);
}

TEST(Fair, ClassesAreSharedSeparatelyAndALoneJobIsUnlimited) {
  SharedGpuModel gpu({{.id = 5, .job_class = JobClass::production},
                      opportunistic(1, 1, 100'000, true),
                      opportunistic(2, 3, 100'000, true)});
  auto policy = fair();
  for (int t = 0; t < 40; ++t) {
    gpu.tick(*policy);
    EXPECT_EQ(gpu.job(5).gate.launches, kUnlimited);
  }
  // Inside the opportunistic class, weights still hold.
  double light = 0, heavy = 0;
  for (int t = 0; t < 200; ++t) {
    gpu.tick(*policy);
    light += gpu.job(1).share;
    heavy += gpu.job(2).share;
  }
  EXPECT_NEAR(heavy / light, 3.0, 0.5);
}

TEST(Fair, EqualWeightsAreLeftToTheGpusTimeSlicing) {
  // Equal weights ask for what time-slicing gives between processes: no quota, which on a real
  // GPU would hold a job's launches until the next window.
  SharedGpuModel gpu({opportunistic(1, 1, 100'000, true), opportunistic(2, 1, 1'000'000, true),
                      opportunistic(3, 1, 100'000, false)});
  auto policy = fair();
  for (int t = 0; t < 100; ++t) {
    gpu.tick(*policy);
    for (uint64_t id : {1, 2, 3}) EXPECT_EQ(gpu.job(id).gate.launches, kUnlimited) << id;
  }
}

TEST(Fair, OneBusyJobAmongIdleOnesIsNotHeldBack) {
  // Seven registered jobs of different weights, one of them working: nobody to share with.
  std::vector<ModelJob> jobs;
  for (uint64_t id = 1; id <= 7; ++id) {
    jobs.push_back(opportunistic(id, static_cast<double>(id), 100'000, true));
    jobs.back().demand = id == 1 ? 1.0 : 0.0;
  }
  SharedGpuModel gpu(jobs);
  auto policy = fair();
  double busy = 0;
  for (int t = 0; t < 100; ++t) {
    gpu.tick(*policy);
    EXPECT_EQ(gpu.job(1).gate.launches, kUnlimited);
    busy += gpu.job(1).share / 100;
  }
  EXPECT_GT(busy, 0.99);
}

}  // namespace
}  // namespace gpushare::policies
