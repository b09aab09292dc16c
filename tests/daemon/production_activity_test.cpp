// ProductionActivity: when the idle relay holds an idle-gated opportunistic job (kernel-level idle
// gating). Pure: samples and times are numbers.
#include "production_activity.h"

#include <gtest/gtest.h>

using gpushare::daemon::ActivityTimes;
using gpushare::daemon::ProductionActivity;
using gpushare::daemon::ProductionSignals;

namespace {
constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;
const ActivityTimes kTimes{.quiet_ns = 2 * kMs, .stale_ns = 1000 * kMs};
}  // namespace

TEST(ProductionActivity, LaunchingIsBusy) {
  ProductionActivity a;
  EXPECT_TRUE(a.busy({.launches = 10, .completed = 8, .last_mark = 8}, 0, kTimes));
  EXPECT_TRUE(a.busy({.launches = 11, .completed = 8, .last_mark = 8}, 250 * kUs, kTimes));
}

TEST(ProductionActivity, EveryMarkCompleteIsIdleAtOnce) {
  ProductionActivity a;
  a.busy({.launches = 10, .completed = 4, .last_mark = 8}, 0, kTimes);
  // No launch since, marks up to 10 recorded and complete: nothing on the GPU.
  EXPECT_FALSE(a.busy({.launches = 10, .completed = 10, .last_mark = 10}, 250 * kUs, kTimes));
}

TEST(ProductionActivity, AMarkNotYetCompleteIsBusyAfterTheQuietTime) {
  ProductionActivity a;
  a.busy({.launches = 100, .completed = 10, .last_mark = 100}, 0, kTimes);
  // A long kernel: nothing launched for 50 ms, its mark still pending.
  EXPECT_TRUE(a.busy({.launches = 100, .completed = 10, .last_mark = 100}, 50 * kMs, kTimes));
  EXPECT_FALSE(a.busy({.launches = 100, .completed = 100, .last_mark = 100}, 60 * kMs, kTimes));
}

TEST(ProductionActivity, AnUnmarkedTailIsBusyOnlyForTheQuietTime) {
  ProductionActivity a;
  a.busy({.launches = 102, .completed = 100, .last_mark = 100}, 0, kTimes);
  // Launches 101-102 carry no mark (a stride above 1): covered by the quiet time only.
  EXPECT_TRUE(a.busy({.launches = 102, .completed = 100, .last_mark = 100}, 1 * kMs, kTimes));
  EXPECT_FALSE(a.busy({.launches = 102, .completed = 100, .last_mark = 100}, 3 * kMs, kTimes));
}

TEST(ProductionActivity, WithoutCompletionsOnlyLaunchesCount) {
  ProductionActivity a;
  a.busy({.launches = 5, .completed = std::nullopt, .last_mark = 0}, 0, kTimes);
  EXPECT_TRUE(a.busy({.launches = 6, .completed = std::nullopt, .last_mark = 0}, 1 * kMs, kTimes));
  EXPECT_TRUE(a.busy({.launches = 6, .completed = std::nullopt, .last_mark = 0}, 2 * kMs, kTimes));
  EXPECT_FALSE(a.busy({.launches = 6, .completed = std::nullopt, .last_mark = 0}, 4 * kMs, kTimes));
}

TEST(ProductionActivity, AStuckShimIsIdleOnceStale) {
  ProductionActivity a;
  a.busy({.launches = 50, .completed = 10, .last_mark = 50}, 0, kTimes);
  EXPECT_TRUE(a.busy({.launches = 50, .completed = 10, .last_mark = 50}, 999 * kMs, kTimes));
  // Neither launches nor completions moved for the stale time: the shim is not answering.
  EXPECT_FALSE(a.busy({.launches = 50, .completed = 10, .last_mark = 50}, 1000 * kMs, kTimes));
  // Progress makes it count again.
  EXPECT_TRUE(a.busy({.launches = 50, .completed = 20, .last_mark = 50}, 1001 * kMs, kTimes));
}

TEST(ProductionActivity, AScribbledMarkPastTheLaunchesIsIgnored) {
  ProductionActivity a;
  a.busy({.launches = 10, .completed = 10, .last_mark = 10}, 0, kTimes);
  EXPECT_FALSE(
      a.busy({.launches = 10, .completed = 10, .last_mark = ~uint64_t{0}}, 5 * kMs, kTimes));
}
