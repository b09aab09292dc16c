// The gate of a job on several devices (daemon/scheduler.h, strictest_gate): one control block
// holds all of a process's launches, so it obeys the strictest of its devices' policies.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpushare::daemon
