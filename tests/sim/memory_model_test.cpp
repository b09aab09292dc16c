// gpushare-sim's memory model (tools/sim/memory_model.h) and the rotation schedules built from
// policies/rotation.h (tools/sim/memory_schedules.h), on cases small enough to work out by hand,
// and on the thesis-shaped example.
#include "memory_model.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "memory_schedules.h"

namespace gpushare::sim {
namespace {

constexpr uint64_t MiB = 1ull << 20;
using policies::RotationOrder;

// Bandwidth 1 MiB per unit both ways: copying n MiB takes n units.
MemoryCase unit_case(uint64_t capacity_mib, std::vector<MemoryJob> jobs) {
  MemoryCase memory_case;
  memory_case.capacity_bytes = capacity_mib * MiB;
  memory_case.host_to_device_bytes_per_s = static_cast<double>(MiB);
  memory_case.device_to_host_bytes_per_s = static_cast<double>(MiB);
  memory_case.jobs = std::move(jobs);
  return memory_case;
}

// X: 10 units of compute, 4 MiB; Y: 6 units, 8 MiB; room for 8 MiB, so Y's copy must wait for
// X's last compute for the half that does not fit beside X.
MemoryCase x_then_y(uint64_t capacity_mib) {
  return unit_case(capacity_mib, {{"X", 10, 0, 4 * MiB, 1, 0}, {"Y", 6, 0, 8 * MiB, 1, 1}});
}

TEST(SimMemory, WithoutPrefetchCopiesAndComputesTakeTurns) {
  const MemoryRun run = run_schedule(x_then_y(8), {0, 1}, /*prefetch=*/false);
  EXPECT_DOUBLE_EQ(run.makespan_s, 4 + 10 + 8 + 6);
  EXPECT_DOUBLE_EQ(run.copy_s, 12);
  EXPECT_DOUBLE_EQ(run.stall_s, 12) << "no copy is hidden";
  EXPECT_EQ(run.bytes_in, 12 * MiB);
  EXPECT_EQ(run.swap_ins, 2u);
}

TEST(SimMemory, PrefetchCopiesIntoTheFreeRoomBeforeTheSwitch) {
  const MemoryRun run = run_schedule(x_then_y(8), {0, 1}, /*prefetch=*/true);
  ASSERT_EQ(run.steps.size(), 2u);
  // Y's first 4 MiB go in at 4-8 while X computes (4-14), the other 4 once X is done: 14-18.
  EXPECT_LT(run.steps[1].copy_start_s, run.steps[0].compute_end_s)
      << "the prefetch starts before the switch";
  EXPECT_DOUBLE_EQ(run.steps[1].copy_start_s, 4);
  EXPECT_DOUBLE_EQ(run.steps[1].copy_end_s, 18);
  EXPECT_DOUBLE_EQ(run.makespan_s, 24);
  EXPECT_DOUBLE_EQ(run.stall_s, 4 + 4);
  // With room for both, Y's copy hides wholly under X's compute.
  EXPECT_DOUBLE_EQ(run_schedule(x_then_y(12), {0, 1}, true).makespan_s, 4 + 10 + 6);
}

TEST(SimMemory, WritebackCopiesTheLeavingJobOutOnTheSameEngine) {
  MemoryCase memory_case = x_then_y(8);
  memory_case.writeback = true;
  const MemoryRun run = run_schedule(memory_case, {0, 1}, true);
  EXPECT_DOUBLE_EQ(run.makespan_s, 14 + 4 + 4 + 6) << "X out (4) then Y's second half (4)";
  EXPECT_EQ(run.bytes_out, 4 * MiB);
}

TEST(SimMemory, ProductionMemoryIsNeverTheJobs) {
  MemoryCase memory_case = x_then_y(12);
  memory_case.production_bytes = 4 * MiB;  // 8 MiB left: the same as x_then_y(8)
  EXPECT_DOUBLE_EQ(run_schedule(memory_case, {0, 1}, true).makespan_s, 24);
  memory_case.production_bytes = 6 * MiB;
  EXPECT_EQ(check_case(memory_case),
            "job 'Y' needs more memory than production leaves on the device");
}

TEST(SimMemory, TheJobUsedFarthestAheadGoesOut) {
  // Room for two of three 4 MiB jobs; order A B A C A: when C comes, B (never used again) goes,
  // not A (least recently used, but needed next).
  const MemoryCase memory_case = unit_case(
      8, {{"A", 1, 0, 4 * MiB, 3, 0}, {"B", 1, 0, 4 * MiB, 1, 1}, {"C", 1, 0, 4 * MiB, 1, 2}});
  EXPECT_EQ(run_schedule(memory_case, {0, 1, 0, 2, 0}, true).swap_ins, 3u);
}

TEST(SimMemory, AnotherJobComputesInOnesIdleTime) {
  // P: 5 compute then 5 idle, two steps; Q: 5 compute. P Q P puts Q in P's idle time.
  const MemoryCase memory_case =
      unit_case(8, {{"P", 5, 5, 1 * MiB, 2, 0}, {"Q", 5, 0, 1 * MiB, 1, 1}});
  EXPECT_DOUBLE_EQ(run_schedule(memory_case, {0, 1, 0}, true).makespan_s, 16);
  EXPECT_DOUBLE_EQ(run_schedule(memory_case, {0, 0, 1}, true).makespan_s, 21);
}

TEST(SimMemory, RefusesAScheduleThatIsNotOneStepPerStep) {
  EXPECT_THROW(run_schedule(x_then_y(8), {0}, true), std::invalid_argument);
  EXPECT_THROW(run_schedule(x_then_y(8), {0, 1, 1}, true), std::invalid_argument);
  EXPECT_THROW(run_schedule(x_then_y(8), {0, 2}, true), std::invalid_argument);
}

TEST(SimMemory, RotationScheduleFollowsThePolicysTurns) {
  // Three 6 MiB jobs, room for 8 MiB: one runs at a time, in FIFO order, one step a turn.
  const MemoryCase memory_case = unit_case(
      8, {{"a", 4, 0, 6 * MiB, 2, 0}, {"b", 4, 0, 6 * MiB, 2, 1}, {"c", 4, 0, 6 * MiB, 1, 2}});
  EXPECT_EQ(rotation_schedule(memory_case, one_step_turns(RotationOrder::fifo, true)),
            (StepOrder{0, 1, 2, 0, 1}));
  // A turn of at least 8 units (min_turn) is two 4-unit steps.
  policies::RotationParameters longer = one_step_turns(RotationOrder::fifo, true);
  longer.min_turn_s = 8;
  EXPECT_EQ(rotation_schedule(memory_case, longer), (StepOrder{0, 0, 1, 1, 2}));
  // When all fit (18 MiB), nobody rotates: the turn length plays no part, all run interleaved.
  EXPECT_EQ(rotation_schedule(unit_case(18, memory_case.jobs), longer), (StepOrder{0, 1, 2, 0, 1}));
}

// The thesis's example survives only as pictures: clients that copy their data in before each
// computation, one copy engine, one compute engine; its makespans are 2375 without prefetch,
// 2062.5 with prefetch and 2005 with prefetch and the weight order. Ours, of the same shape,
// must keep the same ordering; the exact values (in units of 1 MiB copied) catch model changes.
TEST(SimMemory, ThesisShapedCaseNoPrefetchOverPrefetchOverWeightOrder) {
  const MemoryCase memory_case = thesis_shaped_case();
  ASSERT_EQ(check_case(memory_case), "");
  const double no_prefetch =
      run_schedule(memory_case,
                   rotation_schedule(memory_case, one_step_turns(RotationOrder::fifo, false)),
                   false)
          .makespan_s;
  const double prefetch =
      run_schedule(memory_case,
                   rotation_schedule(memory_case, one_step_turns(RotationOrder::fifo, true)), true)
          .makespan_s;
  const StepOrder weight_order =
      rotation_schedule(memory_case, one_step_turns(RotationOrder::weight, true));
  const double weighted = run_schedule(memory_case, weight_order, true).makespan_s;
  EXPECT_GT(no_prefetch, prefetch);
  EXPECT_GT(prefetch, weighted);
  EXPECT_DOUBLE_EQ(no_prefetch, 4000);
  EXPECT_DOUBLE_EQ(prefetch, 3250);
  EXPECT_DOUBLE_EQ(weighted, 2750);
  // Weights D > C > A > B, as in the thesis's example, give its order D, B, C, A: the highest,
  // the lowest, the next highest, the next lowest.
  EXPECT_EQ(weight_order, (StepOrder{3, 1, 2, 0, 3, 1, 2, 0}));
}

}  // namespace
}  // namespace gpushare::sim
