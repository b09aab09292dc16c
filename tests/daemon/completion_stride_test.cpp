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
