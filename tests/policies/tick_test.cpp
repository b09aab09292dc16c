// policies/tick.h: the tick the daemon and the simulator share. What it must never trust from a
// control block, and what it must never write into one.
#include "gpushare/policies/tick.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gpushare::policies {
namespace {

constexpr uint64_t kWindow = 200'000'000;

JobCounters counters(uint64_t id, uint64_t launches, JobClass c = JobClass::opportunistic) {
  JobCounters j;
  j.job_id = id;
  j.job_class = c;
  j.launches = launches;
  return j;
}

TEST(Tick, TheFirstSampleOnlySetsTheBaseline) {
  JobHistory h;
  EXPECT_EQ(observe(h, counters(1, 500), kWindow).launches, 0u);
  EXPECT_EQ(observe(h, counters(1, 800), kWindow).launches, 300u);
}

TEST(Tick, ACounterThatWentBackwardsCountsAsNoWork) {
  JobHistory h;
  observe(h, counters(1, 1000), kWindow);
  JobCounters scribbled = counters(1, 10);
  scribbled.gate_waits = 0;
  EXPECT_EQ(observe(h, scribbled, kWindow).launches, 0u);
  // ... and the next window counts from the scribbled value, not from the old one.
  EXPECT_EQ(observe(h, counters(1, 25), kWindow).launches, 15u);
}

TEST(Tick, CompletionsNeverPassLaunchesNorGoBackwards) {
  JobHistory h;
  JobCounters c = counters(1, 100);
  c.completed_launches = 90;
  EXPECT_FALSE(observe(h, c, kWindow).completed) << "nothing until two samples exist";
  c.launches = 200;
  c.completed_launches = 1'000'000;  // claims more than it launched: clamped to 200
  EXPECT_EQ(observe(h, c, kWindow).completed, 110u);
  c.launches = 300;
  c.completed_launches = 150;  // backwards
  EXPECT_FALSE(observe(h, c, kWindow).completed);
  c.launches = 400;
  c.completed_launches = 170;
  EXPECT_EQ(observe(h, c, kWindow).completed, 20u);
}

TEST(Tick, AnInFlightCountIsPassedOnOnlyWhenItIsCurrent) {
  JobHistory h;
  JobCounters c = counters(1, 10);
  c.in_flight = 3;
  observe(h, c, kWindow);
  c.launches = 20;
  EXPECT_FALSE(observe(h, c, kWindow).in_flight) << "no bound in force: the shim did not publish";
  c.bounded = true;
  EXPECT_FALSE(observe(h, c, kWindow).in_flight) << "no launch in the window: stale";
  c.launches = 30;
  EXPECT_EQ(observe(h, c, kWindow).in_flight, 3u);
  c.bounded = false;
  c.in_flight_exact = true;  // the simulator's case
  EXPECT_EQ(observe(h, c, kWindow).in_flight, 3u);
}

TEST(Tick, BusyTimeIsClampedToTheWindow) {
  JobHistory h;
  JobCounters c = counters(1, 10, JobClass::production);
  c.in_flight_ns = 5 * kWindow;
  EXPECT_EQ(observe(h, c, kWindow).in_flight_ns, kWindow);
}

TEST(Tick, PacedBusyTimeIsNotClampedToTheWindow) {
  JobHistory h;
  JobCounters c = counters(1, 10, JobClass::production);
  observe(h, c, kWindow);
  c.launches = 20;
  EXPECT_FALSE(observe(h, c, kWindow).paced_in_flight_ns);
  c.paced_in_flight_ns = 2 * kWindow;  // the completions took longer than the window: kept
  EXPECT_EQ(observe(h, c, kWindow).paced_in_flight_ns, 2 * kWindow);
}

TEST(Tick, ProductionIsNeverBoundedNorIdleGated) {
  Gate g{.job_id = 1, .launches = kUnlimited, .max_in_flight = 4, .production_idle_only = true};
  JobControl production = control_for(g, JobClass::production, 100);
  EXPECT_EQ(production.max_in_flight, 0u);
  EXPECT_FALSE(production.production_idle_only);
  JobControl opportunistic = control_for(g, JobClass::opportunistic, 100);
  EXPECT_EQ(opportunistic.max_in_flight, 4u);
  EXPECT_TRUE(opportunistic.production_idle_only);
}

TEST(Tick, AGateOfNoLaunchesPausesAndAllowancesAreCumulative) {
  Gate none{.job_id = 1, .launches = 0};
  EXPECT_TRUE(control_for(none, JobClass::opportunistic, 100).paused);
  Gate some{.job_id = 1, .launches = 50};
  JobControl c = control_for(some, JobClass::opportunistic, 100);
  EXPECT_FALSE(c.paused);
  EXPECT_EQ(c.allowance, 150u);
}

// Answers in the reverse order of its jobs, with a distinct allowance per job.
class ReversingPolicy : public Policy {
 public:
  std::string_view name() const override { return "reversing"; }
  std::vector<Gate> decide(const DeviceObservation& device) override {
    seen = device;
    std::vector<Gate> gates;
    for (const JobObservation& j : device.jobs)
      gates.push_back(Gate{.job_id = j.job_id, .launches = j.job_id * 10});
    std::reverse(gates.begin(), gates.end());
    return gates;
  }
  DeviceObservation seen;
};

TEST(Tick, EachGateReachesItsOwnJobWhateverTheOrder) {
  ReversingPolicy policy;
  std::vector<JobCounters> jobs = {counters(1, 100), counters(2, 1000)};
  JobHistory h1, h2;
  std::vector<JobHistory*> history = {&h1, &h2};
  DeviceTick t = tick_device(policy, jobs, history, 42, kWindow);
  EXPECT_EQ(policy.seen.now_ns, 42u);
  EXPECT_EQ(policy.seen.window_ns, kWindow);
  ASSERT_EQ(t.controls.size(), 2u);
  for (const JobControl& c : t.controls) {
    const uint64_t launches_so_far = c.job_id == 1 ? 100 : 1000;
    EXPECT_EQ(c.allowance, launches_so_far + c.job_id * 10) << "job " << c.job_id;
  }
}

TEST(Tick, AGateForAJobNotObservedIsDropped) {
  class Stranger : public Policy {
   public:
    std::string_view name() const override { return "stranger"; }
    std::vector<Gate> decide(const DeviceObservation&) override {
      return {Gate{.job_id = 99, .launches = 0}};
    }
  } policy;
  std::vector<JobCounters> jobs = {counters(1, 100)};
  JobHistory h;
  std::vector<JobHistory*> history = {&h};
  EXPECT_TRUE(tick_device(policy, jobs, history, 0, kWindow).controls.empty());
}

// A graph a window: each completion's busy time goes with it, not with the window it ends in.
TEST(CompletionPace, ATickReadsTheCompletionsOverTheTimeTheyTook) {
  constexpr uint64_t kUs = 1000, kMs = 1000 * kUs;
  CompletionPace pace;
  EXPECT_FALSE(pace.take()) << "no completion seen yet";
  pace.sample(std::nullopt, 250 * kUs);  // a shim that does not track completions (yet)
  EXPECT_FALSE(pace.take());
  pace.sample(0, 250 * kUs);  // the count first seen: busy since the start
  pace.sample(0, 10 * kMs);
  pace.sample(1, 2 * kMs);  // the first graph done 12.5 ms in
  pace.sample(1, 8 * kMs);  // busy on the next, not done at the tick
  std::optional<CompletionPace::Reading> r = pace.take();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 1u);
  EXPECT_EQ(r->in_flight_ns, 12500 * kUs);  // the 8 ms after it belong to the next graph
  pace.sample(2, 4 * kMs);                  // done after 12 ms of busy time, 8 of them before
  pace.sample(2, 0);                        // idle
  r = pace.take();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 2u);
  EXPECT_EQ(r->in_flight_ns, 12 * kMs);
  r = pace.take();  // nothing completed since: no time either, the count as it was
  ASSERT_TRUE(r);
  EXPECT_EQ(r->completed, 2u);
  EXPECT_EQ(r->in_flight_ns, 0u);
}

}  // namespace
}  // namespace gpushare::policies
