// policies/admission.h: each rule of memory admission, and the choice of whose memory moves to
// host, from numbers alone.
#include "gpushare/policies/admission.h"

#include <gtest/gtest.h>

namespace gpushare::policies {
namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;
using V = AdmissionVerdict;

AdmissionRequest production(uint64_t bytes) {
  return AdmissionRequest{.job_class = JobClass::production, .bytes = bytes};
}

AdmissionRequest opportunistic(uint64_t bytes, bool movable) {
  return AdmissionRequest{.job_class = JobClass::opportunistic, .bytes = bytes, .movable = movable};
}

DeviceMemory device(uint64_t capacity, uint64_t resident, uint64_t evictable = 0) {
  return DeviceMemory{.capacity = capacity, .resident = resident, .evictable = evictable};
}

TEST(Admission, AJobOverItsOwnLimitIsRefusedWhateverTheDevice) {
  AdmissionRequest r = production(2 * GiB);
  r.limit = 4 * GiB;
  r.job_bytes = 3 * GiB;
  EXPECT_EQ(decide_admission(r, std::nullopt, {}).verdict, V::refuse_over_limit);
  r.job_bytes = 2 * GiB;
  EXPECT_EQ(decide_admission(r, std::nullopt, {}).verdict, V::admit) << "exactly at the limit";
}

TEST(Admission, WithoutAKnownCapacityEverythingWithinItsLimitIsAdmitted) {
  EXPECT_EQ(decide_admission(opportunistic(100 * GiB, false), std::nullopt, {}).verdict, V::admit);
}

TEST(Admission, OpportunisticMemoryFitsBesideWhatProductionWaitsFor) {
  DeviceMemory d = device(10 * GiB, 6 * GiB);
  EXPECT_EQ(decide_admission(opportunistic(4 * GiB, false), d, {}).verdict, V::admit);
  d.waiting = 1 * GiB;  // a production admission waits: its room is not for the taking
  EXPECT_EQ(decide_admission(opportunistic(4 * GiB, false), d, {}).verdict, V::refuse_device_full);
  EXPECT_EQ(decide_admission(opportunistic(4 * GiB, true), d, {}).verdict, V::admit_on_host);
}

TEST(Admission, AJobWhoseMemoryIsOnHostAddsToItThere) {
  AdmissionRequest r = opportunistic(8 * GiB, true);
  r.job_on_host = true;
  EXPECT_EQ(decide_admission(r, device(10 * GiB, 10 * GiB), {}).verdict, V::admit);
  r.movable = false;  // memory that cannot move still needs device room
  EXPECT_EQ(decide_admission(r, device(10 * GiB, 10 * GiB), {}).verdict, V::refuse_device_full);
}

TEST(Admission, ProductionWaitsBehindAnEarlierProductionAdmission) {
  DeviceMemory d = device(10 * GiB, 2 * GiB, 2 * GiB);
  EXPECT_EQ(decide_admission(production(1 * GiB), d, {}).verdict, V::admit);
  d.waiting = 1 * GiB;
  Admission a = decide_admission(production(1 * GiB), d, {});
  EXPECT_EQ(a.verdict, V::wait_for_room);
  EXPECT_TRUE(a.swap_out.empty()) << "it fits: nobody has to move";
}

TEST(Admission, ProductionBeyondEveryOpportunisticJobOnHostIsRefused) {
  // 10 GiB device: 8 resident, of which 3 movable. 5 fixed + 6 asked > 10.
  EXPECT_EQ(decide_admission(production(6 * GiB), device(10 * GiB, 8 * GiB, 3 * GiB), {}).verdict,
            V::refuse_beyond_capacity);
}

TEST(Admission, TheFewestJobsHoldingTheMostMovableMemoryMakeRoom) {
  // 10 GiB device, 9 resident, 7 movable; production asks 4: 3 GiB must go.
  std::vector<MovableJob> candidates = {{1, 1 * GiB}, {2, 4 * GiB}, {3, 2 * GiB}, {4, 0}};
  Admission a =
      decide_admission(production(4 * GiB), device(10 * GiB, 9 * GiB, 7 * GiB), candidates);
  EXPECT_EQ(a.verdict, V::wait_for_room);
  EXPECT_EQ(a.swap_out, std::vector<uint64_t>{2}) << "one job of 4 GiB covers 3 GiB";
}

TEST(Admission, MemoryAlreadyLeavingCountsTowardTheRoom) {
  // 3 GiB must go, 2 are leaving already: one more GiB, the largest candidate first.
  DeviceMemory d = device(10 * GiB, 9 * GiB, 5 * GiB);
  d.leaving = 2 * GiB;
  std::vector<MovableJob> candidates = {{1, 1 * GiB}, {3, 2 * GiB}};
  Admission a = decide_admission(production(4 * GiB), d, candidates);
  EXPECT_EQ(a.verdict, V::wait_for_room);
  EXPECT_EQ(a.swap_out, std::vector<uint64_t>{3});
}

TEST(Admission, EqualCandidatesAreTakenInTheirGivenOrder) {
  std::vector<MovableJob> candidates = {{7, 2 * GiB}, {5, 2 * GiB}, {6, 2 * GiB}};
  Admission a =
      decide_admission(production(5 * GiB), device(10 * GiB, 10 * GiB, 6 * GiB), candidates);
  EXPECT_EQ(a.swap_out, (std::vector<uint64_t>{7, 5, 6}));
}

TEST(Admission, InconsistentAccountingNeverWrapsAround) {
  // More evictable and leaving than resident (a transient of the daemon's sums): no underflow
  // into a huge "fixed" that would refuse everything.
  DeviceMemory d = device(10 * GiB, 1 * GiB, 4 * GiB);
  d.leaving = 4 * GiB;
  d.waiting = 1 * GiB;
  EXPECT_NE(decide_admission(production(1 * GiB), d, {}).verdict, V::refuse_beyond_capacity);
}

}  // namespace
}  // namespace gpushare::policies
