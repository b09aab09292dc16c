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
  EXPECT_TRUE(a.in_flight());
  // No launch since, marks up to 10 recorded and complete: nothing on the GPU.
  EXPECT_FALSE(a.busy({.launches = 10, .completed = 10, .last_mark = 10}, 250 * kUs, kTimes));
  EXPECT_FALSE(a.in_flight());
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

namespace {
// Feeds `a` marks that each complete `lag` after the sample that first sees them, one sample
// period (250 µs) apart, until it has seen `count` lags; returns the time reached.
uint64_t marks_with_lag(ProductionActivity& a, uint64_t lag, size_t count, uint64_t t = 0) {
  uint64_t launches = 4;
  a.busy({.launches = launches, .completed = launches, .last_mark = launches}, t, kTimes);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t done = launches;
    launches += 4;
    t += 250 * kUs;
    a.busy({.launches = launches, .completed = done, .last_mark = launches}, t, kTimes);
    for (uint64_t waited = 250 * kUs; waited < lag; waited += 250 * kUs) {
      t += 250 * kUs;
      a.busy({.launches = launches, .completed = done, .last_mark = launches}, t, kTimes);
    }
    t += 250 * kUs;
    a.busy({.launches = launches, .completed = launches, .last_mark = launches}, t, kTimes);
  }
  return t;
}
}  // namespace

TEST(ProductionActivity, TheQuietTimeIsTheLongestUntilLagsAreSeen) {
  ProductionActivity a;
  EXPECT_EQ(a.quiet_ns(kTimes), 2 * kMs);
  uint64_t t = marks_with_lag(a, 250 * kUs, ProductionActivity::kLagsKept - 1);
  EXPECT_EQ(a.quiet_ns(kTimes), 2 * kMs);
  // The kLagsKept-th lag is the first that counts.
  marks_with_lag(a, 250 * kUs, 1, t);
  EXPECT_EQ(a.quiet_ns(kTimes), 500 * kUs);
}

TEST(ProductionActivity, MarksDoneSoonShortenTheQuietTime) {
  // A launch-bound server: the GPU keeps up, each mark is seen complete a sample after it is seen.
  ProductionActivity a;
  uint64_t t = marks_with_lag(a, 250 * kUs, ProductionActivity::kLagsKept);
  EXPECT_EQ(a.quiet_ns(kTimes), 500 * kUs);  // one sample's lag and one sample's margin
  // Its request ends with an unmarked tail: busy for the quiet time after its last launch only.
  const uint64_t launches = 4 * (ProductionActivity::kLagsKept + 1);
  t += 250 * kUs;
  EXPECT_TRUE(
      a.busy({.launches = launches + 3, .completed = launches, .last_mark = launches}, t, kTimes));
  EXPECT_TRUE(a.busy({.launches = launches + 3, .completed = launches, .last_mark = launches},
                     t + 250 * kUs, kTimes));
  EXPECT_FALSE(a.busy({.launches = launches + 3, .completed = launches, .last_mark = launches},
                      t + 500 * kUs, kTimes));
  // The busy time the policies measure still counts the fixed quiet time.
  EXPECT_TRUE(a.in_flight());
  a.busy({.launches = launches + 3, .completed = launches, .last_mark = launches}, t + 1999 * kUs,
         kTimes);
  EXPECT_TRUE(a.in_flight());
  a.busy({.launches = launches + 3, .completed = launches, .last_mark = launches}, t + 2 * kMs,
         kTimes);
  EXPECT_FALSE(a.in_flight());
}

TEST(ProductionActivity, MarksAlreadyDoneWhenSeenKeepTheLeastQuietTime) {
  ProductionActivity a;
  uint64_t t = 0;
  a.busy({.launches = 4, .completed = 4, .last_mark = 4}, t, kTimes);
  for (uint64_t n = 8; n <= 4 * (ProductionActivity::kLagsKept + 1); n += 4)
    a.busy({.launches = n, .completed = n, .last_mark = n}, t += 250 * kUs, kTimes);
  EXPECT_EQ(a.quiet_ns(kTimes), 500 * kUs);  // the floor: 250 µs of margin is less
}

TEST(ProductionActivity, AQueueBehindTheLaunchesKeepsTheQuietTimeLong) {
  // A job whose GPU runs 1.5 ms behind its launches: its tail runs about that long too.
  ProductionActivity a;
  marks_with_lag(a, 1500 * kUs, ProductionActivity::kLagsKept);
  EXPECT_EQ(a.quiet_ns(kTimes), 1750 * kUs);
  // Longer than the longest quiet time: the longest.
  ProductionActivity deep;
  marks_with_lag(deep, 5 * kMs, ProductionActivity::kLagsKept);
  EXPECT_EQ(deep.quiet_ns(kTimes), 2 * kMs);
}

TEST(ProductionActivity, OneSlowMarkAmongTheLastLagsSetsTheQuietTime) {
  ProductionActivity a;
  uint64_t t = marks_with_lag(a, 250 * kUs, ProductionActivity::kLagsKept);
  t = marks_with_lag(a, 1250 * kUs, 1, t);
  EXPECT_EQ(a.quiet_ns(kTimes), 1500 * kUs);
  // It ages out after kLagsKept quicker ones.
  marks_with_lag(a, 250 * kUs, ProductionActivity::kLagsKept, t);
  EXPECT_EQ(a.quiet_ns(kTimes), 500 * kUs);
}

TEST(ProductionActivity, MarksGoingBackwardsAreNotTimed) {
  // A new registration restarts the marks: a lag across it would be nonsense. One lag short of
  // kLagsKept, a mark timed across the restart would complete the set.
  ProductionActivity a;
  const uint64_t t = marks_with_lag(a, 250 * kUs, ProductionActivity::kLagsKept - 1);
  const uint64_t n = 4 * ProductionActivity::kLagsKept;  // the launches marks_with_lag reached
  a.busy({.launches = n + 4, .completed = n, .last_mark = n + 4}, t + 250 * kUs, kTimes);
  a.busy({.launches = 8, .completed = 0, .last_mark = 4}, t + 500 * kUs, kTimes);
  a.busy({.launches = 8, .completed = n + 4, .last_mark = 4}, t + 750 * kUs, kTimes);  // scribbled
  EXPECT_EQ(a.quiet_ns(kTimes), 2 * kMs);
  // Marks moving forward again are timed.
  a.busy({.launches = 12, .completed = 4, .last_mark = 12}, t + 1000 * kUs, kTimes);
  a.busy({.launches = 12, .completed = 12, .last_mark = 12}, t + 1250 * kUs, kTimes);
  EXPECT_EQ(a.quiet_ns(kTimes), 500 * kUs);
}
