// The concurrency budget (policies/src/concurrency_budget.h) and `harvest` with concurrency=1,
// driven by a production job whose speed on the GPU beside opportunistic work is a known fraction
// of its gated speed, with per-window noise.
#include "concurrency_budget.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "gpushare/policies/policy.h"

namespace gpushare::policies {
namespace {

using Mode = ConcurrencyBudget::Mode;

ConcurrencySettings settings() {
  return {.target = 0.95, .noise_margin = 1.0, .min_share = 0.05, .max_share = 0.9,
          .initial_share = 0.5, .samples = 8};
}

TEST(ConcurrencyShare, SpendsWhatTheTargetLeavesOnTheMeasuredCost) {
  EXPECT_DOUBLE_EQ(concurrency_share(std::nullopt, settings()), 0.5);  // not measured yet
  EXPECT_DOUBLE_EQ(concurrency_share(ConcurrencyCost{.harm = 0}, settings()), 0.9);
  EXPECT_DOUBLE_EQ(concurrency_share(ConcurrencyCost{.harm = -0.1}, settings()), 0.9);
  EXPECT_DOUBLE_EQ(concurrency_share(ConcurrencyCost{.harm = 0.05}, settings()), 0.9);
  EXPECT_NEAR(concurrency_share(ConcurrencyCost{.harm = 0.25}, settings()), 0.2, 1e-12);
  EXPECT_NEAR(concurrency_share(ConcurrencyCost{.harm = 0.5}, settings()), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(concurrency_share(ConcurrencyCost{.harm = 5}, settings()), 0.05);  // floor
}

TEST(ConcurrencyShare, AnUncertainCostIsSpentMoreCarefully) {
  const double sure = concurrency_share(ConcurrencyCost{.harm = 0.1, .error = 0}, settings());
  const double unsure = concurrency_share(ConcurrencyCost{.harm = 0.1, .error = 0.1}, settings());
  EXPECT_NEAR(sure, 0.5, 1e-12);
  EXPECT_NEAR(unsure, 0.25, 1e-12);
  // A zero cost known only to within 10 % is not spent as if it were certain.
  EXPECT_LT(concurrency_share(ConcurrencyCost{.harm = 0, .error = 0.1}, settings()), 0.9);
}

TEST(ConcurrencyCost, IsTheRatioOfMeanSpeedsWithItsError) {
  EXPECT_FALSE(concurrency_cost({100, 100}, {80, 80, 80}));  // two gated periods: no reference yet
  EXPECT_FALSE(concurrency_cost({100, 100, 100}, {80, 80}));
  const auto exact = concurrency_cost({100, 100, 100}, {80, 80, 80});
  ASSERT_TRUE(exact);
  EXPECT_NEAR(exact->harm, 0.2, 1e-12);
  EXPECT_NEAR(exact->error, 0, 1e-12);
  const auto noisy = concurrency_cost({90, 110, 95, 105}, {72, 88, 76, 84});
  ASSERT_TRUE(noisy);
  EXPECT_NEAR(noisy->harm, 0.2, 1e-12);
  EXPECT_GT(noisy->error, 0.02);
  EXPECT_LT(noisy->error, 0.1);
}

// A production job's start-up periods (on the H100: 1-5 % of its steady speed) must not hold the
// share at its floor: the first steady period of each kind replaces them.
TEST(ConcurrencyBudget, AJobThatChangedReplacesItsOlderPeriods) {
  ConcurrencyBudget budget(settings());
  for (int i = 0; i < 3; ++i) {
    budget.record(1, Mode::beside, 50, 1e9);  // start-up, beside
    budget.record(1, Mode::gated, 2000, 1e9);  // steady, gated
  }
  EXPECT_NEAR(budget.share(), 0.05, 0.005);  // a cost of 97 %, as measured
  budget.record(1, Mode::beside, 1950, 1e9);
  EXPECT_DOUBLE_EQ(budget.share(), 0.5);  // unknown again: measured afresh at the initial share
  budget.record(1, Mode::beside, 1990, 1e9);
  budget.record(1, Mode::beside, 1970, 1e9);
  EXPECT_DOUBLE_EQ(budget.share(), 0.9);
}

TEST(ConcurrencyBudget, SpreadsBesidePeriodsEvenly) {
  ConcurrencyBudget budget(settings());
  // Unmeasured: every other period, starting gated.
  EXPECT_EQ(budget.next_period(), Mode::gated);
  EXPECT_EQ(budget.next_period(), Mode::beside);
  EXPECT_EQ(budget.next_period(), Mode::gated);
  EXPECT_EQ(budget.next_period(), Mode::beside);
  // Measured at a cost of 25 %: one beside period in five.
  for (int i = 0; i < 4; ++i) {
    budget.record(1, Mode::gated, 100, 1e9);
    budget.record(1, Mode::beside, 75, 1e9);
  }
  EXPECT_NEAR(budget.share(), 0.2, 1e-9);
  int beside = 0;
  for (int i = 0; i < 100; ++i) beside += budget.next_period() == Mode::beside ? 1 : 0;
  EXPECT_NEAR(beside, 20, 1);
}

TEST(ConcurrencyBudget, TheCostliestProductionJobDecidesAndGoneJobsAreForgotten) {
  ConcurrencyBudget budget(settings());
  for (int i = 0; i < 4; ++i) {
    budget.record(1, Mode::gated, 100, 1e9);
    budget.record(1, Mode::beside, 100, 1e9);
    budget.record(2, Mode::gated, 100, 1e9);
    budget.record(2, Mode::beside, 50, 1e9);
  }
  EXPECT_NEAR(budget.share(), 0.1, 1e-9);
  ASSERT_TRUE(budget.deciding_cost());
  EXPECT_NEAR(budget.deciding_cost()->harm, 0.5, 1e-9);
  budget.retain({1});
  EXPECT_NEAR(budget.share(), 0.9, 1e-9);
  // A job measured in one kind of period only holds the share at the initial one.
  budget.record(3, Mode::gated, 100, 1e9);
  EXPECT_NEAR(budget.share(), 0.5, 1e-9);
}

TEST(ConcurrencyBudget, APeriodWithoutWorkOrBusyTimeSaysNothing) {
  ConcurrencyBudget budget(settings());
  budget.record(1, Mode::gated, 0, 1e9);
  budget.record(1, Mode::gated, 100, 0);
  budget.record(1, Mode::gated, 100, 0);
  for (int i = 0; i < 3; ++i) budget.record(1, Mode::beside, 100, 1e9);
  EXPECT_FALSE(budget.deciding_cost());
}

// `harvest` with concurrency=1 beside a production job whose speed (kernels per busy second)
// beside opportunistic work is (1 - harm) of its gated speed, ±10 % per window. `closed_loop`:
// production is busy all the time and does less work when slowed (a training loop); otherwise it
// does fixed work per window and is busy longer when slowed (a server at 40 % load).
struct Outcome {
  double production = 0;     // production's mean speed over its gated speed
  double beside_share = 0;   // fraction of windows the opportunistic job ran beside production
};

Outcome run_concurrency(double harm, bool closed_loop, int seconds) {
  auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}});
  EXPECT_TRUE(made.policy) << made.error;
  constexpr uint64_t kWindowNs = 50'000'000;
  constexpr double kSpeed = 20'000;  // kernels per busy second, gated
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  Gate opportunistic_gate{.job_id = 2, .production_idle_only = true};
  double relative_speed = 0;  // summed over the windows measured
  int beside = 0, windows = 0;
  for (int t = 0; t < seconds * 20; ++t) {
    const bool running_beside = !opportunistic_gate.production_idle_only;
    const double speed = kSpeed * (running_beside ? 1 - harm : 1) * noise(random);
    const double busy_s = closed_loop ? 0.05 : 0.02 * kSpeed / speed;
    const double window_work = speed * busy_s;
    DeviceObservation d{.now_ns = t * kWindowNs, .window_ns = kWindowNs};
    d.jobs.push_back({.job_id = 1,
                      .job_class = JobClass::production,
                      .launches = static_cast<uint64_t>(window_work),
                      .completed = static_cast<uint64_t>(window_work),
                      .in_flight_ns = static_cast<uint64_t>(std::min(busy_s, 0.05) * 1e9)});
    d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 50,
                      .gate_waits = 10});
    const std::vector<Gate> gates = made.policy->decide(d);
    EXPECT_EQ(gates.size(), 2u);
    EXPECT_FALSE(gates[0].production_idle_only);  // production is never gated
    EXPECT_TRUE(gates[1].measure_production);
    EXPECT_FALSE(gates[1].paused);  // no probes: the gated periods are the reference
    EXPECT_EQ(gates[1].launches, kUnlimited);  // no rate law
    // The in-flight bound holds only in gated periods (production meets a short queue there).
    EXPECT_EQ(gates[1].max_in_flight, gates[1].production_idle_only ? 4u : 0u);
    if (t >= 10 * 20) {  // after the first 10 s
      relative_speed += running_beside ? 1 - harm : 1;
      beside += running_beside ? 1 : 0;
      ++windows;
    }
    opportunistic_gate = gates[1];
  }
  const Outcome outcome{.production = relative_speed / windows,
                        .beside_share = static_cast<double>(beside) / windows};
  std::printf("cost %.2f (%s): production %.3f of its gated speed, beside %.3f of the windows\n",
              harm, closed_loop ? "closed loop" : "server", outcome.production,
              outcome.beside_share);
  return outcome;
}

// Where running beside production costs it nothing, the opportunistic job runs beside it nearly
// all the time: the budget's largest share (0.95) less the windows skipped after each change.
TEST(HarvestConcurrency, HarmlessConcurrencyRunsBesideProductionAlmostAlways) {
  const Outcome outcome = run_concurrency(0.0, true, 60);
  EXPECT_GE(outcome.beside_share, 0.75);
  EXPECT_GE(outcome.production, 0.97);
}

// Where it costs production 30 % of its speed, the opportunistic job runs beside it only in the
// share that keeps production at the target: about 0.05 / 0.3 of the time.
TEST(HarvestConcurrency, CostlyConcurrencyIsRationedToKeepProductionAtTarget) {
  const Outcome outcome = run_concurrency(0.3, true, 60);
  EXPECT_GE(outcome.production, 0.95 - 0.01);
  EXPECT_GT(outcome.beside_share, 0.04);  // still measured
  EXPECT_LE(outcome.beside_share, 0.2);
}

// A server's throughput is its load: the cost shows as busy time per request (latency), and the
// budget reads it there.
TEST(HarvestConcurrency, AServersCostIsReadInItsBusyTime) {
  const Outcome outcome = run_concurrency(0.3, false, 60);
  EXPECT_GE(outcome.production, 0.95 - 0.01);
  EXPECT_LE(outcome.beside_share, 0.2);
  EXPECT_GE(run_concurrency(0.0, false, 60).beside_share, 0.75);
}

TEST(HarvestConcurrency, NeedsTheGateFromTheSystem) {
  EXPECT_FALSE(make_policy("harvest", {{"concurrency", 1}}, {.kernel_idle_gating = false}).policy);
  EXPECT_NE(make_policy("harvest", {{"concurrency_max", 1}}).error.find("out of range"),
            std::string::npos);
}

// Production idle: the opportunistic job runs unbounded, whatever the schedule (a gated period's
// gate stays: with production idle it holds nothing, and production's return is met at once).
TEST(HarvestConcurrency, IdleProductionLeavesTheOpportunisticJobUnbounded) {
  auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}});
  ASSERT_TRUE(made.policy);
  Gate last;
  for (int t = 0; t < 10; ++t) {
    DeviceObservation d{.now_ns = t * 50'000'000ull, .window_ns = 50'000'000};
    d.jobs.push_back({.job_id = 1, .job_class = JobClass::production, .in_flight_ns = 0});
    d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 50});
    last = made.policy->decide(d)[1];
  }
  EXPECT_EQ(last.max_in_flight, 0u);
  EXPECT_EQ(last.launches, kUnlimited);
  EXPECT_FALSE(last.paused);
}

}  // namespace
}  // namespace gpushare::policies
