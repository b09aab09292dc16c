// Scheduling on several devices (daemon/scheduler.h): a job is seen by the policy of every device
// it uses and by no other, and a job on several devices obeys the strictest of their gates (one
// control block holds all of a process's launches).
#include <gtest/gtest.h>

#include "registry_jobs.h"
#include "scheduler.h"

namespace gpushare::daemon {
namespace {

using policies::Gate;

TEST(StrictestGate, OneDevicesGateIsTheJobsGate) {
  Gate g{.job_id = 7, .launches = 40, .paused = false, .max_in_flight = 3};
  Gate s = strictest_gate({g});
  EXPECT_EQ(s.job_id, 7u);
  EXPECT_EQ(s.launches, 40u);
  EXPECT_FALSE(s.paused);
  EXPECT_EQ(s.max_in_flight, 3u);
}

TEST(StrictestGate, TakesTheFewestLaunchesTheSmallestBoundAndAnyPauseOrIdleGate) {
  Gate open{.job_id = 7};  // unlimited, no bound
  Gate held{.job_id = 7, .launches = 12, .max_in_flight = 8};
  Gate tight{.job_id = 7, .launches = 30, .max_in_flight = 2, .production_idle_only = true};
  Gate s = strictest_gate({open, held, tight});
  EXPECT_EQ(s.launches, 12u);
  EXPECT_EQ(s.max_in_flight, 2u);
  EXPECT_TRUE(s.production_idle_only);
  EXPECT_FALSE(s.paused);
  Gate paused{.job_id = 7, .paused = true};
  EXPECT_TRUE(strictest_gate({open, paused}).paused);
  // No bound anywhere stays no bound; a bound on one device is kept.
  EXPECT_EQ(strictest_gate({open, open}).max_in_flight, 0u);
  EXPECT_EQ(strictest_gate({open, held}).max_in_flight, 8u);
  EXPECT_EQ(strictest_gate({open, open}).launches, policies::kUnlimited);
}

// /metrics' per-device status lists the devices whose policy decided something this tick, with
// the opportunistic allowance where the device has opportunistic jobs.
TEST(MultiDeviceScheduling, AJobOnTwoDevicesIsSeenByBothPolicies) {
  Registry registry;
  registry.add(job_with_block(registry, protocol::JobClass::opportunistic, {1, 0}));
  Scheduler scheduler;
  auto none = [](int) { return PolicyChoice{}; };
  Clock::time_point t0 = Clock::now();
  scheduler.tick(registry, t0, none);
  scheduler.tick(registry, t0 + std::chrono::milliseconds(50), none);
  const auto& status = scheduler.device_status();
  ASSERT_EQ(status.size(), 2u);
  EXPECT_TRUE(status.at(0).opportunistic_limit_per_second);
  EXPECT_TRUE(status.at(1).opportunistic_limit_per_second);
  EXPECT_EQ(Scheduler::devices_of(registry.jobs().begin()->second), (std::vector<int>{1, 0}));
}

TEST(MultiDeviceScheduling, AJobHoldingMemoryIsScheduledWhereItsMemoryIs) {
  Registry registry;
  // It sees both devices and works on device 1.
  Job job = job_with_block(registry, protocol::JobClass::opportunistic, {0, 1});
  job.set_allocation({1, 0x1000}, DeclaredAllocation{.bytes = 4096});
  EXPECT_EQ(Scheduler::devices_of(job), std::vector<int>{1});
  Job any = job_with_block(registry, protocol::JobClass::opportunistic, {});
  EXPECT_EQ(Scheduler::devices_of(any), std::vector<int>{0});  // any device: device 0
}

}  // namespace
}  // namespace gpushare::daemon
