// Rotating residency (policies/rotation.h): order, turn length, resident set, prefetch, swap-outs,
// and production's memory never counted as the rotation's.
#include "gpushare/policies/rotation.h"

#include <gtest/gtest.h>

namespace gpushare::policies {
namespace {

constexpr uint64_t GiB = 1ull << 30;

// Three 8 GiB jobs over 12 GiB left after production: one and a half of them fit.
RotationState one_and_a_half() {
  RotationState state;
  state.capacity_bytes = 24 * GiB;
  state.production_bytes = 12 * GiB;
  state.jobs = {
      {1, 8 * GiB, 0.6, 2.0, 0, true},   // weight 0.3
      {2, 8 * GiB, 0.2, 2.0, 1, false},  // 0.1
      {3, 8 * GiB, 0.8, 1.0, 2, false},  // 0.8
  };
  return state;
}

RotationParameters with_order(RotationOrder order) {
  RotationParameters parameters;
  parameters.order = order;
  return parameters;
}

TEST(Rotation, EverythingFitsMeansNoRotation) {
  RotationState state = one_and_a_half();
  state.production_bytes = 0;
  state.capacity_bytes = 24 * GiB;
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_FALSE(decision.rotating);
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_FALSE(decision.prefetch);
  EXPECT_TRUE(decision.swap_out.empty());
  EXPECT_EQ(decision.turn_s, 0);
}

TEST(Rotation, OrdersByWeightFifoOrFixedList) {
  const RotationState state = one_and_a_half();
  // Weights 3: 0.8, 1: 0.3, 2: 0.1: highest, lowest, then the middle one (swap_order.h).
  EXPECT_EQ(rotation_order(state.jobs, with_order(RotationOrder::weight)),
            (std::vector<uint64_t>{3, 2, 1}));
  EXPECT_EQ(rotation_order(state.jobs, with_order(RotationOrder::fifo)),
            (std::vector<uint64_t>{1, 2, 3}));
  RotationParameters fixed = with_order(RotationOrder::fixed);
  fixed.fixed_order = {2, 9, 2};  // unknown and repeated ids are skipped; unlisted jobs follow
  EXPECT_EQ(rotation_order(state.jobs, fixed), (std::vector<uint64_t>{2, 1, 3}));
}

TEST(Rotation, HeadRunsNextIsPrefetchedIntoTheRoomLeftOthersGoOut) {
  RotationState state = one_and_a_half();
  state.jobs[1].resident = true;  // 1 and 2 are on the device at the start
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_TRUE(decision.rotating);
  EXPECT_EQ(decision.budget_bytes, 12 * GiB) << "production's 12 GiB are never the rotation's";
  EXPECT_EQ(decision.order, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1}));
  ASSERT_TRUE(decision.prefetch);
  EXPECT_EQ(*decision.prefetch, 2u);
  // Half of it fits beside the running job, less the 1/16 of the budget left for new allocations.
  EXPECT_EQ(decision.prefetch_bytes, 4 * GiB - 12 * GiB / 16);
  EXPECT_TRUE(decision.swap_out.empty()) << "2 is being prefetched: it stays";
  // Turn: max(min_turn 1 s, 4 x the next job's 2 s swap-in).
  EXPECT_DOUBLE_EQ(decision.turn_s, 8.0);

  state.jobs[1].resident = false;
  state.jobs[2].resident = true;  // 3 is resident but neither runs nor comes next
  EXPECT_EQ(decide_rotation(state, with_order(RotationOrder::fifo)).swap_out,
            (std::vector<uint64_t>{3}));
}

TEST(Rotation, NothingIsPrefetchedBesideAJobStillGrowing) {
  // A job reaching its working set would find its room taken by the prefetch: on the H100 its
  // next allocation sent it to host, the prefetch went out again for its turn, and so on.
  RotationState state = one_and_a_half();
  state.jobs[0].growing = true;
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1}));
  EXPECT_FALSE(decision.prefetch);
  EXPECT_TRUE(decision.swap_out.empty());
  // Once it has stopped growing, the next job comes in beside it.
  state.jobs[0].growing = false;
  EXPECT_EQ(decide_rotation(state, with_order(RotationOrder::fifo)).prefetch, 2u);
}

TEST(Rotation, AJobKeepsTheRoomItOnceHeld) {
  // Job 1 holds 2 GiB now but has held 8: the prefetch gets what is left beside the 8.
  RotationState state = one_and_a_half();
  state.jobs[0].bytes = 2 * GiB;
  state.jobs[0].peak_bytes = 8 * GiB;
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1}));
  ASSERT_TRUE(decision.prefetch);
  EXPECT_EQ(decision.prefetch_bytes, 4 * GiB - 12 * GiB / 16);
  // And a rotation is not ended by a job that shrank for a moment.
  state.production_bytes = 4 * GiB;  // 20 GiB left: 2 + 8 + 8 would fit, 8 + 8 + 8 do not
  EXPECT_TRUE(decide_rotation(state, with_order(RotationOrder::fifo)).rotating);
}

TEST(Rotation, ThePrefetchLeavesRoomForTheRunningJobsNewAllocations) {
  // 1/16 of the budget stays free: a running job's allocation that found none would send it to
  // host whole. Where no more than that is left, nothing is prefetched.
  RotationState state = one_and_a_half();
  state.jobs[0].bytes = 12 * GiB - 12 * GiB / 16;
  EXPECT_FALSE(decide_rotation(state, with_order(RotationOrder::fifo)).prefetch);
  state.jobs[0].bytes -= GiB;
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  ASSERT_TRUE(decision.prefetch);
  EXPECT_EQ(decision.prefetch_bytes, GiB);
}

TEST(Rotation, WithoutPrefetchNothingIsCopiedBeforeTheSwitch) {
  RotationParameters parameters = with_order(RotationOrder::fifo);
  parameters.prefetch = false;
  const RotationDecision decision = decide_rotation(one_and_a_half(), parameters);
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1}));
  EXPECT_FALSE(decision.prefetch);
  EXPECT_EQ(decision.prefetch_bytes, 0u);
}

TEST(Rotation, TurnLastsItsLengthThenPassesToTheNextInTheCycle) {
  RotationState state = one_and_a_half();
  const RotationParameters fifo = with_order(RotationOrder::fifo);
  state.current = 1;
  state.turn_elapsed_s = 7.9;  // the turn is 8 s (next job 2: 2 s swap-in x 4)
  EXPECT_EQ(decide_rotation(state, fifo).run, (std::vector<uint64_t>{1}));
  state.turn_elapsed_s = 8.0;
  RotationDecision decision = decide_rotation(state, fifo);
  EXPECT_EQ(decision.order, (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{2}));
  EXPECT_EQ(*decision.prefetch, 3u);
  EXPECT_DOUBLE_EQ(decision.turn_s, 4.0) << "3 comes back in 1 s";

  state.current = 3;  // the last one's turn is over: the cycle wraps
  state.turn_elapsed_s = 100;
  EXPECT_EQ(decide_rotation(state, fifo).run, (std::vector<uint64_t>{1}));
}

TEST(Rotation, AJobThatLeftHandsItsTurnToItsSuccessor) {
  RotationState state = one_and_a_half();
  state.jobs.push_back({4, 8 * GiB, 0.5, 2.0, 3, false});
  state.previous_order = {1, 2, 3, 4};
  state.current = 2;
  state.jobs.erase(state.jobs.begin() + 1);  // 2 finished during its turn
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{3})) << "FIFO keeps its place in the cycle";
  EXPECT_EQ(*decision.prefetch, 4u);
}

TEST(Rotation, SeveralFitTogetherAndATooLargeJobWaits) {
  RotationState state;
  state.capacity_bytes = 20 * GiB;
  state.production_bytes = 4 * GiB;
  state.jobs = {{1, 6 * GiB, 0.5, 1.0, 0, true},
                {2, 6 * GiB, 0.5, 1.0, 1, true},
                {3, 6 * GiB, 0.5, 1.0, 2, false},
                {4, 17 * GiB, 0.5, 1.0, 3, false}};
  const RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.too_large, (std::vector<uint64_t>{4})) << "17 GiB > 16 GiB left";
  EXPECT_EQ(decision.order, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(*decision.prefetch, 3u);
  EXPECT_EQ(decision.prefetch_bytes, 4 * GiB - 16 * GiB / 16);
}

TEST(Rotation, ProductionGrowingShrinksTheBudgetNeverProduction) {
  RotationState state = one_and_a_half();
  state.production_bytes = 16 * GiB;  // 8 GiB left: one job at a time, nothing to prefetch into
  RotationDecision decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.budget_bytes, 8 * GiB);
  EXPECT_EQ(decision.run, (std::vector<uint64_t>{1}));
  EXPECT_FALSE(decision.prefetch) << "no room beside the running job";
  state.production_bytes = 30 * GiB;  // more than the capacity: every job waits
  decision = decide_rotation(state, with_order(RotationOrder::fifo));
  EXPECT_EQ(decision.budget_bytes, 0u);
  EXPECT_TRUE(decision.run.empty());
  EXPECT_EQ(decision.too_large, (std::vector<uint64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace gpushare::policies
