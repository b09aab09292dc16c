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

// While production idles: 1/32 of its typical busy phase, within queue_ms and the most.
TEST(IdleQueue, IsAShareOfProductionsBusyPhaseWithinTheBounds) {
  EXPECT_DOUBLE_EQ(idle_queue_ms(0.5, 8, 16), 15.625);      // 0.5 s phases
  EXPECT_DOUBLE_EQ(idle_queue_ms(1.0, 8, 16), 16);          // S5's 1 s phases: the most
  EXPECT_DOUBLE_EQ(idle_queue_ms(0.2, 8, 16), 8);           // 6.25 ms: queue_ms
  EXPECT_DOUBLE_EQ(idle_queue_ms(0.05, 8, 16), 8);          // a server's 50 ms: queue_ms
  EXPECT_DOUBLE_EQ(idle_queue_ms(std::nullopt, 8, 16), 8);  // no phase known yet
  EXPECT_DOUBLE_EQ(idle_queue_ms(1.0, 8, 0), 0);            // idle_queue_ms 0: no bound
  EXPECT_DOUBLE_EQ(idle_queue_ms(0.5, 0, 16), 15.625);
  EXPECT_DOUBLE_EQ(idle_queue_ms(0.2, 0, 16), 6.25);
  EXPECT_DOUBLE_EQ(idle_queue_ms(std::nullopt, 0, 16), 0);  // nothing to go by: no bound
  EXPECT_DOUBLE_EQ(idle_queue_ms(1.0, 20, 16), 16);         // the most wins over queue_ms
  EXPECT_DOUBLE_EQ(idle_queue_ms(std::numeric_limits<double>::quiet_NaN(), 8, 16), 8);
}

// A phase counts the windows production was busy from its return to its next idle phase; the
// typical one is the median of the last five.
// Beside busy production: the loop's bound where production's paused windows read no gaps
// (gaps_limit 0.9 and above), the server's below it and before any reading.
TEST(BesideQueue, IsTheLoopsWhereProductionLeavesNoGaps) {
  EXPECT_EQ(beside_queue_ms(1.0, 0.9, 8, 16), 16);
  EXPECT_EQ(beside_queue_ms(0.9, 0.9, 8, 16), 16);
  EXPECT_EQ(beside_queue_ms(0.89, 0.9, 8, 16), 8);
  EXPECT_EQ(beside_queue_ms(std::nullopt, 0.9, 8, 16), 8);
  EXPECT_EQ(beside_queue_ms(1.0, 0.9, 8, 0), 0);  // no bound beside a loop
  EXPECT_EQ(beside_queue_ms(0.5, 0.9, -1, 16), 0);
}

TEST(IdleQueue, BusyPhasesAreMedianOfTheRecentOnes) {
  BusyPhases phases;
  EXPECT_FALSE(phases.typical_s());
  phases.end();  // idle from the start: no phase
  EXPECT_FALSE(phases.typical_s());
  for (int i = 0; i < 20; ++i) phases.busy(50'000'000);
  EXPECT_FALSE(phases.typical_s());  // not ended yet
  phases.end();
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 1.0);
  phases.end();  // a second idle signal without a busy window adds nothing
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 1.0);
  for (double s : {0.1, 4.0, 1.0, 1.0, 0.2}) {
    phases.busy(static_cast<uint64_t>(s * 1e9));
    phases.end();
  }
  // The first 1 s phase has left: 0.1, 4, 1, 1, 0.2.
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 1.0);
  for (int i = 0; i < 3; ++i) {
    phases.busy(100'000'000);
    phases.end();
  }
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 0.1);  // 1, 0.2, 0.1, 0.1, 0.1
  for (int i = 0; i < 3; ++i) {
    phases.busy(4'000'000'000);
    phases.drop();  // not kept (production's start-up)
  }
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 0.1);
  phases.busy(100'000'000);
  phases.drop();
  phases.busy(1'000'000'000);
  phases.end();                                // only what came after the drop: 1 s
  EXPECT_DOUBLE_EQ(*phases.typical_s(), 0.1);  // 0.2, 0.1, 0.1, 0.1, 1
}
