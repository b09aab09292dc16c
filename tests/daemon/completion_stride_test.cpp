// The completion stride the daemon gives a production job (daemon/scheduler.h): fine enough that a
// window sees several marks, never finer than one mark per launch nor coarser than 32 launches,
// and steady against small changes of the launch rate.
#include <gtest/gtest.h>

#include "scheduler.h"

using gpushare::daemon::completion_stride_for;

TEST(CompletionStride, FollowsTheLaunchesPerWindow) {
  EXPECT_EQ(completion_stride_for(0, 0), 1u);
  EXPECT_EQ(completion_stride_for(6, 0), 1u);      // 6 launches a window: a mark at each
  EXPECT_EQ(completion_stride_for(64, 0), 8u);     // 8 marks a window
  EXPECT_EQ(completion_stride_for(1800, 0), 32u);  // resnet50 training on an H100: capped
}

TEST(CompletionStride, ChangesOnlyWhenFourTimesOff) {
  EXPECT_EQ(completion_stride_for(130, 8), 8u);    // wants 16: kept
  EXPECT_EQ(completion_stride_for(600, 8), 32u);   // wants 32: changed
  EXPECT_EQ(completion_stride_for(64, 32), 8u);    // wants 8: changed
  EXPECT_EQ(completion_stride_for(200, 32), 32u);  // wants 16: kept
}

TEST(CompletionStride, AnIdleWindowKeepsTheStride) {
  EXPECT_EQ(completion_stride_for(0, 32), 32u);
}

using gpushare::daemon::completion_marks_for;
using gpushare::daemon::kIdleGatingPollUs;
using gpushare::daemon::kIdleGatingStride;

TEST(CompletionMarks, FineOnlyBesideAnIdleGatedJob) {
  // A launch-bound job (1,800 launches a window): marks every 4 launches only while a neighbour
  // waits for it to be idle; measured alone, it keeps the load's stride and gets the fast polls.
  const auto gated = completion_marks_for(1800, 32, /*idle_gated=*/true, /*measured=*/true);
  EXPECT_EQ(gated.stride, kIdleGatingStride);
  EXPECT_EQ(gated.poll_us, kIdleGatingPollUs);
  const auto measured = completion_marks_for(1800, 32, /*idle_gated=*/false, /*measured=*/true);
  EXPECT_EQ(measured.stride, 32u);
  EXPECT_EQ(measured.poll_us, kIdleGatingPollUs);
  const auto neither = completion_marks_for(1800, 32, false, false);
  EXPECT_EQ(neither.stride, 32u);
  EXPECT_EQ(neither.poll_us, 0u);  // the shim's default
}

TEST(CompletionMarks, BackToTheLoadsStrideOnceNoJobIsGated) {
  // The stride set while a neighbour was gated (4) is left at once: 4 is 8x off the load's 32.
  EXPECT_EQ(completion_marks_for(1800, kIdleGatingStride, false, true).stride, 32u);
  // A job with few launches keeps its fine stride either way.
  EXPECT_EQ(completion_marks_for(20, 1, true, true).stride, 1u);
  EXPECT_EQ(completion_marks_for(20, 1, false, true).stride, 1u);
}
