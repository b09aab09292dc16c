// The daemon's steps towards a rotation decision (daemon/rotation_steps.h), rule by rule: one move
// at a time, swap-outs before anything comes in, the resident set in order, the prefetch only
// while the resident set runs, and never past the capacity or ahead of a waiting production
// allocation.
#include "rotation_steps.h"

#include <gtest/gtest.h>

namespace gpushare::daemon {
namespace {

using policies::RotationDecision;
using Kind = RotationStepKind;

constexpr uint64_t kMiB = 1 << 20;

// Three jobs of 40 MiB, a budget of 60: job 1's turn, job 2 prefetched by 20, job 3 out.
RotationDecision turn_of_1() {
  RotationDecision d;
  d.rotating = true;
  d.order = {1, 2, 3};
  d.run = {1};
  d.prefetch = 2;
  d.prefetch_bytes = 20 * kMiB;
  d.budget_bytes = 60 * kMiB;
  return d;
}

RotatingJob job(uint64_t id, SwapState state, uint64_t on_device_mib) {
  return {id, state, 40 * kMiB, on_device_mib * kMiB};
}

bool same(const std::vector<RotationStep>& steps, const std::vector<RotationStep>& expected) {
  if (steps.size() != expected.size()) return false;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].kind != expected[i].kind || steps[i].job_id != expected[i].job_id ||
        steps[i].bytes != expected[i].bytes)
      return false;
  return true;
}

TEST(RotationSteps, NothingWhileAJobOfTheDeviceMoves) {
  for (SwapState moving : {SwapState::swapping_in, SwapState::swapping_out}) {
    std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40), job(2, moving, 20),
                                     job(3, SwapState::swapped_out, 0)};
    EXPECT_TRUE(rotation_steps(turn_of_1(), jobs, {64 * kMiB, 44 * kMiB, false}).empty());
  }
}

TEST(RotationSteps, AMoveOverdueNoLongerHoldsTheOthersAndIsNotAskedAgain) {
  // Job 3 (a stopped process) never acknowledged its swap-out: job 1 runs, job 2 is prefetched.
  RotatingJob stuck = job(3, SwapState::swapping_out, 40);
  stuck.overdue = true;
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::swapped_out, 0), stuck};
  EXPECT_TRUE(same(rotation_steps(turn_of_1(), jobs, {104 * kMiB, 84 * kMiB, false}),
                   {{Kind::prefetch, 2, 20 * kMiB}}));
  // Overdue in the resident set: nothing is asked of it again, and no prefetch passes it.
  RotationDecision d = turn_of_1();
  d.order = {3, 1, 2};
  d.run = {3};
  d.prefetch = 1;
  jobs[0] = job(1, SwapState::swapped_out, 0);
  jobs[2] = job(3, SwapState::swapping_in, 40);
  jobs[2].overdue = true;
  EXPECT_TRUE(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, false}).empty());
}

TEST(RotationSteps, TheHeadRunningItsSuccessorIsPrefetchedIntoTheRoomLeft) {
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::swapped_out, 0),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(same(rotation_steps(turn_of_1(), jobs, {64 * kMiB, 44 * kMiB, false}),
                   {{Kind::prefetch, 2, 20 * kMiB}}));
}

TEST(RotationSteps, APrefetchedJobIsNotPrefetchedTwice) {
  // The shim brought what whole allocations fit; asked again it would find none that fits.
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::prefetched, 10),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(rotation_steps(turn_of_1(), jobs, {64 * kMiB, 54 * kMiB, false}).empty());
}

TEST(RotationSteps, NoPrefetchWhenTheDecisionHasNone) {
  RotationDecision d = turn_of_1();
  d.prefetch.reset();
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::swapped_out, 0),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, false}).empty());
}

TEST(RotationSteps, TheSwitchSwapsOutFirstAndBringsNothingInMeanwhile) {
  // Job 2's turn: job 1 leaves; job 2's rest would not fit beside it yet.
  RotationDecision d = turn_of_1();
  d.order = {2, 3, 1};
  d.run = {2};
  d.prefetch = 3;
  d.swap_out = {1};
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::prefetched, 20),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 64 * kMiB, false}),
                   {{Kind::swap_out, 1, 40 * kMiB}}));

  // Job 1 on host: the rest of job 2 comes in; job 3's prefetch waits until job 2 runs.
  jobs[0] = job(1, SwapState::swapped_out, 0);
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 24 * kMiB, false}),
                   {{Kind::swap_in, 2, 20 * kMiB}}));

  // Job 2 runs: job 3 is prefetched.
  jobs[1] = job(2, SwapState::resident, 40);
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, false}),
                   {{Kind::prefetch, 3, 20 * kMiB}}));
}

TEST(RotationSteps, WithTwoJobsTheOneWhoseTurnEndedLeavesWholeToBePrefetchedAgain) {
  // Job 2's turn; job 1, next in the cycle, is to be prefetched by 20 but holds all its 40.
  RotationDecision d = turn_of_1();
  d.order = {2, 1};
  d.run = {2};
  d.prefetch = 1;
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::prefetched, 20)};
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 64 * kMiB, false}),
                   {{Kind::swap_out, 1, 40 * kMiB}}));
  // On host: job 2's rest comes in, then job 1 is prefetched.
  jobs[0] = job(1, SwapState::swapped_out, 0);
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 24 * kMiB, false}),
                   {{Kind::swap_in, 2, 20 * kMiB}}));
  jobs[1] = job(2, SwapState::resident, 40);
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, false}),
                   {{Kind::prefetch, 1, 20 * kMiB}}));
}

TEST(RotationSteps, AJobPrefetchedWholeResumesWithoutAMove) {
  RotationDecision d = turn_of_1();
  d.run = {1, 2};
  d.prefetch = 3;
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::prefetched, 40),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(same(rotation_steps(d, jobs, {104 * kMiB, 84 * kMiB, false}),
                   {{Kind::resume, 2, 0}, {Kind::prefetch, 3, 20 * kMiB}}));
}

TEST(RotationSteps, TheResidentSetComesInInOrderAndOnlyWhenItFits) {
  RotationDecision d = turn_of_1();
  d.run = {1, 2};
  d.prefetch.reset();
  std::vector<RotatingJob> jobs = {job(1, SwapState::swapped_out, 0),
                                   job(2, SwapState::swapped_out, 0)};
  // One at a time, the first of the order first.
  EXPECT_TRUE(same(rotation_steps(d, jobs, {100 * kMiB, 4 * kMiB, false}),
                   {{Kind::swap_in, 1, 40 * kMiB}}));
  // Job 1 does not fit yet: job 2 does not take the room it waits for.
  EXPECT_TRUE(rotation_steps(d, jobs, {100 * kMiB, 70 * kMiB, false}).empty());
}

TEST(RotationSteps, NothingComesInWhileProductionWaitsButSwapOutsStillGo) {
  RotationDecision d = turn_of_1();
  std::vector<RotatingJob> jobs = {job(1, SwapState::swapped_out, 0),
                                   job(2, SwapState::swapped_out, 0),
                                   job(3, SwapState::resident, 40)};
  d.swap_out = {3};
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, true}),
                   {{Kind::swap_out, 3, 40 * kMiB}}));
  jobs[2] = job(3, SwapState::swapped_out, 0);
  EXPECT_TRUE(rotation_steps(d, jobs, {64 * kMiB, 4 * kMiB, true}).empty());
  // No production waiting: job 1 comes in.
  EXPECT_TRUE(
      same(rotation_steps(d, jobs, {64 * kMiB, 4 * kMiB, false}), {{Kind::swap_in, 1, 40 * kMiB}}));
}

TEST(RotationSteps, APrefetchThatNoLongerFitsWaits) {
  // Production grew since the decision: the room it counted is gone.
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::swapped_out, 0),
                                   job(3, SwapState::swapped_out, 0)};
  EXPECT_TRUE(rotation_steps(turn_of_1(), jobs, {64 * kMiB, 50 * kMiB, false}).empty());
}

TEST(RotationSteps, JobsThatLeftAreSkipped) {
  RotationDecision d = turn_of_1();
  d.swap_out = {7};
  d.run = {8, 1};
  std::vector<RotatingJob> jobs = {job(1, SwapState::resident, 40),
                                   job(2, SwapState::swapped_out, 0)};
  EXPECT_TRUE(same(rotation_steps(d, jobs, {64 * kMiB, 44 * kMiB, false}),
                   {{Kind::prefetch, 2, 20 * kMiB}}));
}

}  // namespace
}  // namespace gpushare::daemon
