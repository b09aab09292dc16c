// The opportunistic queue bound (policies/src/queue_bound.h): about queue_ms of a job's own work,
// in kernels at its recent launch rate.
#include "queue_bound.h"

#include <gtest/gtest.h>

#include <limits>

using namespace gpushare::policies;

TEST(QueueBound, IsTheKernelsOfThatMuchWorkAtTheJobsRate) {
  EXPECT_EQ(queue_bound(20'000, 4, 4), 80u);  // mobilenet_v2 training on the H100: ~20 per ms
  EXPECT_EQ(queue_bound(20'100, 4, 4), 81u);  // rounded up
  EXPECT_EQ(queue_bound(200, 4, 4), 4u);      // 5 ms kernels: the least, not 0.8
  EXPECT_EQ(queue_bound(200, 4, 1), 1u);
  EXPECT_EQ(queue_bound(1e9, 4, 4), kMostQueued);
  EXPECT_EQ(queue_bound(std::numeric_limits<double>::quiet_NaN(), 4, 4), 4u);
  EXPECT_EQ(queue_bound(20'000, 4, 0), 80u);  // a least of 0 is taken as 1
  EXPECT_EQ(queue_bound(0, 4, 0), 1u);
}

TEST(QueueBound, NoneUntilThreeWindowsAreKnownOrWhenSwitchedOff) {
  QueueRate rate;
  EXPECT_EQ(rate.bound(4, 4), 0u);
  rate.record(20'000);
  rate.record(20'000);
  EXPECT_EQ(rate.bound(4, 4), 0u);
  rate.record(20'000);
  EXPECT_EQ(rate.bound(4, 4), 80u);
  EXPECT_EQ(rate.bound(0, 4), 0u);  // queue_ms 0: no bound
}

// The window in which production came back (the job held for most of it) and the burst after a
// pause move the median of the last eight windows little; a lasting change of rate moves it.
TEST(QueueBound, FollowsTheMedianOfTheRecentWindows) {
  QueueRate rate;
  for (double r : {20'000.0, 21'000.0, 19'000.0, 500.0, 20'000.0, 90'000.0, 20'000.0})
    rate.record(r);
  EXPECT_EQ(rate.bound(4, 4), 80u);
  for (int i = 0; i < 8; ++i) rate.record(5'000);
  EXPECT_EQ(rate.bound(4, 4), 20u);
  rate.record(0);  // a window without launches or a bad value says nothing
  rate.record(-1);
  rate.record(std::numeric_limits<double>::infinity());
  rate.record(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(rate.bound(4, 4), 20u);
}
