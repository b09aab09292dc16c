// A recorded daemon trace as a memory case (tools/sim/memory_replay.h): steps from bursts, idle
// time without the pauses for memory, working sets from swappable memory, production and
// non-swappable memory as production bytes, rates from the swaps, and what a recording must have.
#include "memory_replay.h"

#include <gtest/gtest.h>

namespace gpushare::sim {
namespace {

constexpr uint64_t kMiB = 1 << 20;

Recording two_jobs_and_production() {
  Recording r;
  r.tick_s = 0.05;
  r.capacity_bytes = 64 * kMiB;
  RecordedJob production{1, "prod", true, 4 * kMiB, 0, {{0.0, 5.0}}, {}};
  // a: bursts of 1 s and 2 s (mean 1.5), one gap of 3 s of which 2 s paused: idle 1 s.
  RecordedJob a{2, "a", false, 42 * kMiB, 40 * kMiB, {{1.0, 2.0}, {5.0, 7.0}}, {{2.5, 4.5}}};
  // b: one burst shorter than a tick counts a tick.
  RecordedJob b{3, "b", false, 40 * kMiB, 40 * kMiB, {{2.0, 2.01}}, {}};
  // c: never launched: not a job of the case, but its memory never left either.
  RecordedJob c{4, "c", false, 8 * kMiB, 0, {}, {}};
  r.jobs = {production, a, b, c};
  r.swaps = {{true, 40 * kMiB, 0.5}, {true, 40 * kMiB, 1.5}, {false, 20 * kMiB, 2.0}};
  return r;
}

TEST(SimMemoryReplay, StepsIdleWorkingSetsProductionAndRatesComeFromTheRecording) {
  Replay replay;
  ASSERT_EQ(replay_case(two_jobs_and_production(), replay), "");
  const MemoryCase& c = replay.memory_case;
  EXPECT_EQ(c.capacity_bytes, 64 * kMiB);
  // production 4 + a's 2 that never move + c's 8.
  EXPECT_EQ(c.production_bytes, 14 * kMiB);
  EXPECT_DOUBLE_EQ(c.host_to_device_bytes_per_s, 80.0 * kMiB / 2.0);
  EXPECT_DOUBLE_EQ(c.device_to_host_bytes_per_s, 20.0 * kMiB / 2.0);
  ASSERT_EQ(c.jobs.size(), 2u);
  EXPECT_EQ(c.jobs[0].name, "a");
  EXPECT_EQ(c.jobs[0].steps, 2u);
  EXPECT_DOUBLE_EQ(c.jobs[0].compute_s, 1.5);
  EXPECT_DOUBLE_EQ(c.jobs[0].idle_s, 1.0);
  EXPECT_EQ(c.jobs[0].bytes, 40 * kMiB);
  EXPECT_EQ(c.jobs[1].name, "b");
  EXPECT_DOUBLE_EQ(c.jobs[1].compute_s, 0.05);
  EXPECT_DOUBLE_EQ(c.jobs[1].idle_s, 0.0);
  EXPECT_EQ(c.jobs[0].arrival, 0u);
  EXPECT_EQ(c.jobs[1].arrival, 1u);
  EXPECT_DOUBLE_EQ(replay.measured_makespan_s, 7.0 - 1.0);
  EXPECT_EQ(check_case(c), "");
}

TEST(SimMemoryReplay, WithoutSwapsOutTheDeviceToHostRateIsTheOtherOne) {
  Recording r = two_jobs_and_production();
  r.swaps = {{true, 10 * kMiB, 1.0}};
  Replay replay;
  ASSERT_EQ(replay_case(r, replay), "");
  EXPECT_DOUBLE_EQ(replay.memory_case.device_to_host_bytes_per_s, 10.0 * kMiB);
}

TEST(SimMemoryReplay, TwoJobsOfOneNameStayApart) {
  Recording r = two_jobs_and_production();
  r.jobs[2].name = "a";
  Replay replay;
  ASSERT_EQ(replay_case(r, replay), "");
  EXPECT_EQ(replay.memory_case.jobs[1].name, "a#3");
}

TEST(SimMemoryReplay, ARecordingMissingWhatTheModelNeedsIsRefusedByName) {
  Replay replay;
  Recording r = two_jobs_and_production();
  r.capacity_bytes.reset();
  EXPECT_EQ(replay_case(r, replay), "the trace names no capacity for the device");
  r = two_jobs_and_production();
  r.swaps = {{false, 10 * kMiB, 1.0}, {true, 0, 1.0}};
  EXPECT_NE(replay_case(r, replay).find("host-to-device rate cannot be measured"),
            std::string::npos);
  r = two_jobs_and_production();
  r.jobs.resize(1);
  EXPECT_NE(replay_case(r, replay).find("no opportunistic job"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::sim
