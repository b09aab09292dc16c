// The concurrency budget (policies/src/concurrency_budget.h) and `harvest` with concurrency=1,
// driven by a production job whose speed on the GPU in each mode is a known fraction of its solo
// speed, with per-window noise.
#include "concurrency_budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <utility>

#include "gpushare/policies/policy.h"
#include "queue_bound.h"

namespace gpushare::policies {
namespace {

constexpr size_t kPaused = 0, kGated = 1, kBeside = 2;

ConcurrencySettings settings() {
  return {.target = 0.95, .noise_margin = 1.0, .reference_share = 0.05, .explore_share = 0.05,
          .samples = 16};
}

// A cost given without its pairs (samples 0) is taken as known: it rests on cost_samples pairs.
ModeMeasures measured(ModeCost gated, double gated_gain, ModeCost beside, double beside_gain) {
  for (ModeCost* c : {&gated, &beside})
    if (c->samples == 0) c->samples = 16;
  ModeMeasures m;
  m.cost = {ModeCost{}, gated, beside};
  m.gain = {0.0, gated_gain, beside_gain};
  return m;
}

double loss(const std::array<double, kRunModes>& shares, const ModeMeasures& m) {
  return shares[kGated] * m.cost[kGated]->harm + shares[kBeside] * m.cost[kBeside]->harm;
}

// Beside is learnt first, paused and beside alternating; gated only once beside is shown not to
// fit the target, at a quarter of the time beside leaves.
TEST(ModeShares, BesideIsLearntFirstAndGatedOnlyWhenNeeded) {
  ModeMeasures m = measured({.harm = 0}, 1, {.harm = 0}, 1);
  m.cost[kBeside].reset();
  m.cost[kGated].reset();
  const auto learning = mode_shares(m, settings());
  EXPECT_DOUBLE_EQ(learning[kPaused], kLearningReference);
  EXPECT_DOUBLE_EQ(learning[kGated], 0);
  EXPECT_DOUBLE_EQ(learning[kBeside], 1 - kLearningReference);
  m.cost[kBeside] = ModeCost{.harm = 0.01, .error = 0.01, .samples = 16};
  const auto fits = mode_shares(m, settings());
  EXPECT_NEAR(fits[kBeside], 0.95, 1e-12);
  EXPECT_NEAR(fits[kGated], 0, 1e-12);
  EXPECT_NEAR(fits[kPaused], 0.05, 1e-12);
  m.cost[kBeside] = ModeCost{.harm = 0.2, .error = 0.01, .samples = 16};
  const auto costly = mode_shares(m, settings());
  EXPECT_LT(costly[kBeside], 0.3);
  EXPECT_NEAR(costly[kGated], (1 - costly[kBeside]) / 4, 1e-12);
  EXPECT_NEAR(costly[kPaused] + costly[kGated] + costly[kBeside], 1, 1e-12);
}

// Gated runs the opportunistic jobs only in production's gaps: beside a production job in flight
// at least gaps_limit of its paused windows it is not learnt, and the time beside cannot have is
// paused (concurrency_budget.h: on the H100 beside jobs in flight all the time it gained 0-4
// launches a window in seven runs of nine). A server with gaps still learns it; so does a job
// whose busy share is not yet measured.
TEST(ModeShares, GatedIsLearntOnlyWhereProductionLeavesGaps) {
  ModeMeasures m = measured({.harm = 0}, 1, {.harm = 0.2, .error = 0.01, .samples = 16}, 1);
  m.cost[kGated].reset();
  m.gain[kGated].reset();
  m.busy = 0.95;
  const auto no_gaps = mode_shares(m, settings());
  EXPECT_DOUBLE_EQ(no_gaps[kGated], 0);
  EXPECT_NEAR(no_gaps[kPaused] + no_gaps[kBeside], 1, 1e-12);
  for (const std::optional<double> busy : {std::optional<double>{0.6}, std::optional<double>{}}) {
    m.busy = busy;
    const auto gaps = mode_shares(m, settings());
    EXPECT_NEAR(gaps[kBeside], no_gaps[kBeside], 1e-12);
    EXPECT_NEAR(gaps[kGated], (1 - gaps[kBeside]) / 4, 1e-12);
  }
}

// While production is owed a loss, no mode runs for its measurement alone: a costly beside gets
// what the budget allows it, not its exploring share (which would add to the debt).
TEST(ModeShares, NothingIsExploredWhileProductionIsOwed) {
  ModeMeasures m = measured({.harm = 0}, 0, {.harm = 0.36, .error = 0.01, .samples = 16}, 1);
  m.cost[kGated].reset();
  m.gain[kGated].reset();
  m.busy = 1;
  // Charged 0.37: what the allowance leaves after its exploring share is set aside.
  EXPECT_NEAR(mode_shares(m, settings())[kBeside], (0.05 - 0.05 * 0.37) / 0.37, 1e-12);
  // Owed 0.04: the 0.01 left does not cover that share, and beside is not run for its own sake
  // (it was, at 0.05).
  const auto owed = mode_shares(m, settings(), 0.04);
  EXPECT_DOUBLE_EQ(owed[kBeside], 0);
  EXPECT_DOUBLE_EQ(owed[kPaused], 1);
}

// The busy share is the median of recent paused windows: beside ones (production slowed) and a
// window far off (a phase's edge) do not move it.
TEST(ConcurrencyBudget, ReadsProductionsBusyShareFromPausedWindows) {
  ConcurrencyBudget budget(settings());
  budget.record_busy(RunMode::paused, 0.97);
  budget.record_busy(RunMode::paused, 0.99);
  EXPECT_FALSE(budget.measures().busy);  // two windows: not yet
  budget.record_busy(RunMode::beside, 0.2);
  budget.record_busy(RunMode::gated, 0.2);
  budget.record_busy(RunMode::paused, 0.1);
  budget.record_busy(RunMode::paused, 1.5);  // clipped to the whole window
  ASSERT_TRUE(budget.measures().busy);
  EXPECT_NEAR(*budget.measures().busy, 0.98, 1e-12);
}

// Beside a gappy production job that it does not slow, the opportunistic job runs beside it all
// the time but the reference share: gated, which gains less, is not explored while beside takes
// all the time (on the H100 its 5 % held the opportunistic job under 0.9 of MPS-prio's).
TEST(ModeShares, AFreeModeTakesAllButTheReference) {
  const auto shares = mode_shares(measured({.harm = 0.02}, 0.3, {.harm = 0}, 0.8), settings());
  EXPECT_NEAR(shares[kBeside], 0.95, 1e-12);
  EXPECT_NEAR(shares[kGated], 0, 1e-12);
  EXPECT_NEAR(shares[kPaused], 0.05, 1e-12);
}

// A mode that harvests less is still run its exploring share where it could be needed: one wrong
// reading (a gain of 0 while the opportunistic job was still starting) must not keep beside out
// for good. Gated is explored again as soon as beside cannot take all the time.
TEST(ModeShares, AModeThatLostIsStillMeasured) {
  const auto beside_lost = mode_shares(measured({.harm = 0}, 0.3, {.harm = 0}, 0.0), settings());
  EXPECT_NEAR(beside_lost[kBeside], 0.05, 1e-12);
  EXPECT_NEAR(beside_lost[kGated], 0.90, 1e-12);
  const auto gated_lost = mode_shares(measured({.harm = 0}, 0.0, {.harm = 0}, 0.8), settings());
  EXPECT_NEAR(gated_lost[kGated], 0, 1e-12);
  EXPECT_NEAR(gated_lost[kBeside], 0.95, 1e-12);
  const auto beside_limited =
      mode_shares(measured({.harm = 0}, 0.0, {.harm = 0.1}, 0.8), settings());
  EXPECT_NEAR(beside_limited[kGated], 0.05, 1e-12);
  EXPECT_LT(beside_limited[kBeside], 0.5);
}

// Beside a saturating production job every mode costs it: the opportunistic job gets the most
// the target allows, and the rest of the time it is paused.
TEST(ModeShares, CostlyModesShareWhatTheTargetLeaves) {
  const ModeMeasures m = measured({.harm = 0.25}, 0.13, {.harm = 0.2}, 0.5);
  const auto shares = mode_shares(m, settings());
  EXPECT_LE(loss(shares, m), 0.05 + 1e-12);
  EXPECT_NEAR(shares[kBeside], (0.05 - 0.05 * 0.45) / 0.2, 1e-12);  // best gain per cost
  EXPECT_NEAR(shares[kGated], 0.05, 1e-12);                          // explored
  EXPECT_GT(shares[kPaused], 0.8);
}

// A server: gating costs it little and harvests its gaps, running beside it costs more and
// harvests more. Both, with time and budget used up, beat either alone.
TEST(ModeShares, ModesAreMixedWhereThatHarvestsMore) {
  const ModeMeasures m = measured({.harm = 0.02}, 0.4, {.harm = 0.3}, 0.9);
  const auto shares = mode_shares(m, settings());
  EXPECT_LE(loss(shares, m), 0.05 + 1e-12);
  EXPECT_GT(shares[kGated], 0.8);
  EXPECT_GT(shares[kBeside], 0.05);
  EXPECT_NEAR(shares[kPaused], 0.05, 1e-9);
  EXPECT_GT(0.4 * shares[kGated] + 0.9 * shares[kBeside], 0.4 * 0.95);
}

// A cost shown to exceed what the target allows is spent as if it were higher: uncertainty
// errs toward production.
TEST(ModeShares, AnUncertainCostShownTooHighIsSpentMoreCarefully) {
  const auto sure = mode_shares(measured({.harm = 0.2}, 0, {.harm = 0.2}, 1), settings());
  const auto unsure =
      mode_shares(measured({.harm = 0.2}, 0, {.harm = 0.2, .error = 0.05}, 1), settings());
  EXPECT_LT(unsure[kBeside], sure[kBeside]);
  EXPECT_GT(unsure[kBeside], 0);
}

// A cost that the noise cannot tell from one within the target does not throttle: beside a
// launch-bound production job a measured 6.5 % +- 3 % runs the opportunistic job beside it all
// the time but the reference share; a clear 6.5 % (no noise) is rationed.
TEST(ModeShares, ACostWithinTheNoiseOfTheTargetGetsTheBenefitOfTheDoubt) {
  const auto doubtful = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = 0.065, .error = 0.03, .samples = 16}, 1), settings());
  EXPECT_NEAR(doubtful[kBeside], 0.95, 0.01);  // all but the reference
  const auto clear = mode_shares(measured({.harm = 0.1}, 0, {.harm = 0.065}, 1), settings());
  EXPECT_LT(clear[kBeside], 0.8);
  // Taken low it must fit all the time the mode could get: 12 % +- 3 % does not.
  const auto costly = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = 0.12, .error = 0.03, .samples = 16}, 1), settings());
  EXPECT_LT(costly[kBeside], 0.4);
  // The doubt is for a reading within twice the target's allowance, its error too: beside a
  // saturating job on the H100 (true cost 15-24 %) 12 % +- 9 % and 7 % +- 13 % are rationed;
  // beside a gappy one, whose speed is noisy, -15 % +- 9 % is not.
  for (const ModeCost& reading : {ModeCost{.harm = 0.122, .error = 0.088, .samples = 16},
                                  ModeCost{.harm = 0.068, .error = 0.134, .samples = 16}}) {
    const auto rationed = mode_shares(measured({.harm = 0.1}, 0, reading, 1), settings());
    EXPECT_LT(rationed[kBeside], 0.3);
  }
  const auto noisy = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = -0.146, .error = 0.094, .samples = 16}, 1), settings());
  EXPECT_NEAR(noisy[kBeside], 0.95, 1e-12);
}

// A server's requests spend 1 / (service rate - arrival rate) in the system: a mode that costs
// the server `cost` of its speed at utilisation `busy` stretches that by (1 - busy) / (1 - busy -
// cost), without end where it leaves less speed than the load.
TEST(SojournFactor, IsTheQueuesTimeAfterOverBefore) {
  EXPECT_NEAR(sojourn_factor(0.52, 0.35), 0.48 / 0.13, 1e-12);  // S2's transformer server beside
  EXPECT_NEAR(sojourn_factor(0.35, 0.15), 1.3, 1e-12);
  EXPECT_DOUBLE_EQ(sojourn_factor(0.5, 0), 1);
  EXPECT_DOUBLE_EQ(sojourn_factor(0.5, -0.1), 1);  // a mode read faster than paused: no stretch
  EXPECT_TRUE(std::isinf(sojourn_factor(0.6, 0.4)));
  EXPECT_TRUE(std::isinf(sojourn_factor(1.5, 0)));  // busy is a share: at most 1
  EXPECT_DOUBLE_EQ(sojourn_factor(-1, 0.5), 2);     // at least 0
}

// A mode runs one window at a time where production may be a server (busy unknown or below
// gaps_limit) while its cost is unknown, or where the estimate would stretch a server's requests
// beyond tail_factor (without busy: a clear cost, kClearCost); a loop that keeps the GPU busy, a
// cheap estimate, or no tail_factor keep the periods long.
TEST(BriefExposure, IsForACostThatStretchesAServersRequests) {
  ConcurrencySettings s = settings();
  s.tail_factor = 1.2;
  const auto none = std::nullopt;
  EXPECT_TRUE(brief_exposure(none, s, none));  // nothing known yet
  EXPECT_TRUE(brief_exposure(0.52, s, none));  // a server, its cost not yet known
  EXPECT_TRUE(brief_exposure(0.52, s, 0.5));   // S2's server beside: about 50 %
  // At utilisation 0.55 a cost beyond 0.45 x (1 - 1 / 1.2) = 7.5 % stretches it beyond 1.2:
  // call 82's beside (about 30 %) does.
  EXPECT_TRUE(brief_exposure(0.55, s, 0.3));
  EXPECT_TRUE(brief_exposure(0.55, s, 0.08));
  EXPECT_FALSE(brief_exposure(0.55, s, 0.07));
  EXPECT_FALSE(brief_exposure(0.55, s, -0.05));  // read faster than paused
  // A lightly loaded server has more room: at 0.2, 13 %.
  EXPECT_FALSE(brief_exposure(0.2, s, 0.12));
  EXPECT_TRUE(brief_exposure(0.2, s, 0.14));
  // Busy unknown: a clear cost.
  EXPECT_TRUE(brief_exposure(none, s, kClearCost));
  EXPECT_FALSE(brief_exposure(none, s, kClearCost - 1e-9));
  // A loop in flight all its paused windows: never.
  EXPECT_FALSE(brief_exposure(0.99, s, none));
  EXPECT_FALSE(brief_exposure(0.9, s, 0.5));
  // No tail_factor: never (it is the tail's protection, as the bound is).
  s.tail_factor = 0;
  EXPECT_FALSE(brief_exposure(0.55, s, 0.5));
  EXPECT_FALSE(brief_exposure(none, s, none));
}

// With tail_factor, a mode that would stretch a server's requests beyond it runs only
// kTailExploreShare of its busy time, whatever the allowance leaves: on the H100 beside a Poisson
// transformer server (in flight 52 % of its paused windows) running beside cost 35 % (a factor of
// 3.7) and got 5-9 % of its busy time, and the server's p99 was 2.3-3.3 times isolated's. Gated,
// which costs it nothing, takes the time. A training loop (in flight all the time) leaves no gaps
// and is not a server, nor is a closed loop with gaps whose loss is lost work (queues false); a
// cheap mode is not bounded; without tail_factor nothing is.
TEST(ModeShares, AServersTailBoundsTheModesThatStretchItsRequests) {
  ConcurrencySettings tail = settings();
  tail.tail_factor = 1.2;
  auto server = [](double busy, ModeCost beside, bool queues = true) {
    ModeMeasures m = measured({.harm = -0.08, .error = 0.05, .samples = 16}, 0.35, beside, 0.75);
    m.busy = busy;
    m.queues = {queues, queues, queues};
    return m;
  };
  const ModeCost costly{.harm = 0.35, .error = 0.04, .samples = 16};
  const auto bounded = mode_shares(server(0.52, costly), tail);
  EXPECT_NEAR(bounded[kBeside], kTailExploreShare, 1e-9);
  EXPECT_NEAR(bounded[kGated], 1 - tail.reference_share - kTailExploreShare, 1e-9);
  EXPECT_GT(mode_shares(server(0.52, costly), settings())[kBeside], 0.05);  // without the bound
  EXPECT_GT(mode_shares(server(1.0, costly), tail)[kBeside], 0.05);         // no gaps: no server
  // Gaps, but the loss is lost work, not queueing (a launch-bound closed loop): no server either.
  EXPECT_GT(mode_shares(server(0.52, costly, false), tail)[kBeside], 0.05);
  // The cost is read at its estimate, not given the doubt: on the H100 (call 80) beside read 9.5 %
  // +- 7.2 % at a utilisation of 0.47 (taken low a factor of 1.05, at its estimate 1.22), was given
  // the doubt and ran 0.84 of the server's busy time, and its p99 was 2.8 times isolated's. Its
  // noise cannot tell it from a cost that fits the tail, so it is rechecked, at kTailRecheckShare
  // (taken high, 16.7 %, a tenth of the requests meeting it would stretch the p99 by 1.07).
  const ModeCost doubted{.harm = 0.095, .error = 0.072, .samples = 16};
  EXPECT_NEAR(mode_shares(server(0.47, doubted), tail)[kBeside], kTailRecheckShare, 1e-9);
  EXPECT_NEAR(mode_shares(server(0.47, doubted), settings())[kBeside], 1 - tail.reference_share,
              1e-9);  // given the doubt without the bound
  const ModeCost cheap{.harm = 0.03, .error = 0.03, .samples = 16};
  EXPECT_NEAR(mode_shares(server(0.52, cheap), tail)[kBeside], 1 - tail.reference_share, 1e-9);
  // While production is owed, nothing is explored, this mode neither.
  EXPECT_NEAR(mode_shares(server(0.52, costly), tail, 0.01)[kBeside], 0, 1e-9);
}

// A held reading that its noise cannot tell from one that fits the tail is rechecked: beside a
// server in flight 0.4 of its time (a cost of 10 % stretches its requests by 1.2), beside read
// at 15 % +- 7 % runs kTailRecheckShare of the time, taken from paused's and then from gated's,
// which fits and would take it all; what the recheck costs is set aside from the allowance. Read
// at 30 % +- 4 % (no pair would read it as fitting), it barely runs; read at 15 % +- 20 %, taken
// high (35 %: a stretch of 2.4) a tenth of the requests meeting it would stretch the p99 by 1.32,
// more than the tail allows, and it barely runs either.
TEST(ModeShares, TailHeldReadingsAreRechecked) {
  ConcurrencySettings tail = settings();
  tail.tail_factor = 1.2;
  auto server = [](ModeCost beside, ModeCost gated = {.harm = 0.01, .error = 0.01, .samples = 16}) {
    ModeMeasures m = measured(gated, 0.3, beside, 0.8);
    m.busy = 0.4;
    m.queues = {true, true, true};
    return m;
  };
  const auto contested = mode_shares(server({.harm = 0.15, .error = 0.07, .samples = 16}), tail);
  EXPECT_NEAR(contested[kBeside], kTailRecheckShare, 1e-9);
  EXPECT_NEAR(contested[kPaused], tail.reference_share, 1e-9);
  EXPECT_NEAR(contested[kGated], 1 - tail.reference_share - kTailRecheckShare, 1e-9);
  // While production is owed a loss, nothing is explored, but a contested reading is rechecked.
  const auto owed = mode_shares(server({.harm = 0.15, .error = 0.07, .samples = 16}), tail, 0.01);
  EXPECT_NEAR(owed[kBeside], kTailRecheckShare, 1e-9);
  const auto clear = mode_shares(server({.harm = 0.3, .error = 0.04, .samples = 16}), tail);
  EXPECT_NEAR(clear[kBeside], kTailExploreShare, 1e-9);
  const auto unbearable = mode_shares(server({.harm = 0.15, .error = 0.2, .samples = 16}), tail);
  EXPECT_NEAR(unbearable[kBeside], kTailExploreShare, 1e-9);
  // Gated costly enough that the allowance limits it (9 % +- 1 %, within the tail): the
  // recheck's cost comes out of it.
  const ModeCost costly_gated{.harm = 0.09, .error = 0.01, .samples = 16};
  const auto limited =
      mode_shares(server({.harm = 0.3, .error = 0.04, .samples = 16}, costly_gated), tail);
  const auto rechecking =
      mode_shares(server({.harm = 0.15, .error = 0.07, .samples = 16}, costly_gated), tail);
  EXPECT_NEAR(rechecking[kBeside], kTailRecheckShare, 1e-9);
  EXPECT_LT(rechecking[kGated], limited[kGated] - 0.01);
  EXPECT_LE(rechecking[kBeside] * 0.22 + rechecking[kGated] * 0.1, 0.05 + 1e-9);  // taken high
  // Both held and contested: each rechecked, from paused's time.
  const auto both = mode_shares(server({.harm = 0.15, .error = 0.07, .samples = 16},
                                       {.harm = 0.15, .error = 0.07, .samples = 16}),
                                tail);
  EXPECT_NEAR(both[kBeside], kTailRecheckShare, 1e-9);
  EXPECT_NEAR(both[kGated], kTailRecheckShare, 1e-9);
}

// The p99 of a server's time in the system where a share of its requests take longer
// (exponential times): none or all of them, by 1 or the factor; a tenth, by 1.20 for twice as
// long and 1.86 for 3.7 times (S2's transformer server beside); kTailExploreShare, by 1.03.
TEST(ModeShares, AShareOfSlowerRequestsStretchesTheP99) {
  EXPECT_NEAR(p99_factor(0, 3), 1, 1e-9);
  EXPECT_NEAR(p99_factor(1, 3), 3, 1e-9);
  EXPECT_NEAR(p99_factor(0.3, 1), 1, 1e-9);
  EXPECT_NEAR(p99_factor(0.1, 2), 1.197, 0.001);
  EXPECT_NEAR(p99_factor(0.1, 3.7), 1.864, 0.001);
  EXPECT_NEAR(p99_factor(kTailExploreShare, 3.7), 1.031, 0.001);
  // A mode that leaves a server less speed than its load: the queue grows without bound, and
  // the p99 is the rest's while they are fewer than 1 %: ln(0.995 / 0.005) over ln 100.
  const double never = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(p99_factor(0.1, never)));
  EXPECT_TRUE(std::isinf(p99_factor(0.01, never)));
  EXPECT_NEAR(p99_factor(0.005, never), std::log(0.995 / 0.005) / std::log(100.0), 1e-12);
  EXPECT_NEAR(p99_factor(0.005, 1e6), p99_factor(0.005, never), 0.01);  // the limit
}

// A reading given the doubt on few pairs of periods is measured again the sooner: beside a
// saturating job on the H100 (true cost about 25 %) the first three pairs read 5.3 % +- 5.7 %.
// On three pairs of the eight asked for, production is paused about a third of its time (the
// reference share raised in proportion to the pairs missing), so that paused periods next to
// beside ones correct it; on eight, the reference share is back to its 5 %.
TEST(ModeShares, ADoubtOnFewPairsIsMeasuredAgainSooner) {
  const auto early = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = 0.053, .error = 0.057, .samples = 3}, 1), settings());
  EXPECT_NEAR(early[kPaused], kLearningReference * 5 / 8, 1e-12);
  EXPECT_NEAR(early[kBeside], 1 - kLearningReference * 5 / 8, 1e-12);
  const auto enough = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = 0.053, .error = 0.057, .samples = 8}, 1), settings());
  EXPECT_NEAR(enough[kBeside], 0.95, 1e-12);
  // A mode that barely runs does not hold the reference share up: gated, dominated by beside and
  // not run, keeps its early reading on three pairs for good (on the H100 it held beside at
  // 0.69-0.85 of a gappy job's busy time for a whole benchmark); beside's rests on eight.
  const auto dominated = mode_shares(
      measured({.harm = -0.05, .error = 0.1, .samples = 3}, 0.3,
               {.harm = 0.04, .error = 0.05, .samples = 8}, 0.8),
      settings());
  EXPECT_NEAR(dominated[kBeside], 0.95, 1e-12);
  EXPECT_NEAR(dominated[kGated], 0, 1e-12);
  // A cost taken high is rationed anyway: its pairs are not hurried.
  const auto high = mode_shares(
      measured({.harm = 0.1}, 0, {.harm = 0.2, .error = 0.03, .samples = 3}, 1), settings());
  EXPECT_LT(high[kBeside], 0.3);
}

// A reading given the doubt on fewer than doubt_samples pairs that fits even taken clear_margin
// (2) errors high, on 4 pairs at least, does not rest on the doubt: the paused share is the
// reference share at once. On 3 pairs, 2 errors beyond the allowance, while production is owed
// (the allowance less the debt), or with clear_margin 0, the doubt's share as before.
TEST(ModeShares, AReadingClearOfTheDoubtIsNotHurried) {
  const ModeCost clear{.harm = 0.01, .error = 0.015, .samples = 4};  // 0.04, 0.038 of the time
  EXPECT_TRUE(clearly_fits(clear, settings(), 0.05));
  const auto at_once = mode_shares(measured({.harm = 0.1}, 0, clear, 1), settings());
  EXPECT_NEAR(at_once[kPaused], 0.05, 1e-12);
  EXPECT_NEAR(at_once[kBeside], 0.95, 1e-12);
  ModeCost three = clear;
  three.samples = 3;
  EXPECT_FALSE(clearly_fits(three, settings(), 0.05));
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, three, 1), settings())[kPaused],
              kLearningReference * 5 / 8, 1e-12);
  const ModeCost wider{.harm = 0.01, .error = 0.02, .samples = 4};  // 0.05, 0.0475 of the time
  EXPECT_TRUE(clearly_fits(wider, settings(), 0.05));
  const ModeCost wide{.harm = 0.02, .error = 0.02, .samples = 4};  // 0.06, 0.057 of the time
  EXPECT_FALSE(clearly_fits(wide, settings(), 0.05));
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, wide, 1), settings())[kPaused],
              kLearningReference * 4 / 8, 1e-12);
  EXPECT_FALSE(clearly_fits(clear, settings(), 0.03));  // owed 0.02
  EXPECT_GE(mode_shares(measured({.harm = 0.1}, 0, clear, 1), settings(), 0.02)[kPaused],
            kLearningReference * 4 / 8 - 1e-12);
  ConcurrencySettings off = settings();
  off.clear_margin = 0;
  EXPECT_FALSE(clearly_fits(clear, off, 0.05));
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, clear, 1), off)[kPaused],
              kLearningReference * 4 / 8, 1e-12);
  // A negative reading is as clear as its upper end says: -0.05 +- 0.04 reaches 0.03. One that
  // is not (-0.07 +- 0.07 reaches 0.07) is measured again the sooner, though taken one error high
  // it is 0 (until 2026-12-06 such a reading, its low and high both 0, was not).
  EXPECT_TRUE(clearly_fits({.harm = -0.05, .error = 0.04, .samples = 5}, settings(), 0.05));
  const ModeCost negative{.harm = -0.07, .error = 0.07, .samples = 5};
  EXPECT_FALSE(clearly_fits(negative, settings(), 0.05));
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, negative, 1), settings())[kPaused],
              kLearningReference * 3 / 8, 1e-12);
}

// The reference share is kept where the plan pauses no more than it, every mode given time reads
// clearly within the target, and the recent periods paused production more than that share of
// their time (weights as ConcurrencyBudget keeps them: paused, gated, beside).
TEST(ReferenceKept, WhereTheRecentPeriodsPausedMoreThanItsShare) {
  const ConcurrencySettings s = settings();                     // reference_share 0.05
  EXPECT_TRUE(reference_kept({2, 0, 18}, 0.05, true, s));       // 0.10 of the recent time
  EXPECT_FALSE(reference_kept({0.5, 0, 19.5}, 0.05, true, s));  // 0.025
  EXPECT_FALSE(reference_kept({1, 0, 19}, 0.05, true, s));      // 0.05: not more
  EXPECT_FALSE(reference_kept({2, 0, 18}, 0.2, true, s));       // a reading asks for more
  EXPECT_FALSE(reference_kept({2, 0, 18}, 0.05, false, s));     // a mode not clearly within
  EXPECT_FALSE(reference_kept({0, 0, 0}, 0.05, true, s));       // nothing run yet
}

// Robust costs: a cost held against beside on four pairs, one of which read it within the
// target's allowance, is rechecked at the share the doubt would pause (half the time with none,
// less in proportion to the pairs measured), even while production is owed; a cost no pair
// contests, or one resting on doubt_samples pairs, is rationed as before.
TEST(ModeShares, RobustCostsRecheckAContestedCostOnFewPairs) {
  ConcurrencySettings robust = settings();
  robust.robust_costs = true;
  const ModeCost contested{.harm = 0.3, .error = 0.1, .samples = 4, .least_harm = -0.02};
  const auto plain = mode_shares(measured({.harm = 0.1}, 0, contested, 1), settings());
  EXPECT_LT(plain[kBeside], 0.1);  // what the target leaves a 40 % cost (taken high)
  const auto rechecked = mode_shares(measured({.harm = 0.1}, 0, contested, 1), robust);
  EXPECT_NEAR(rechecked[kBeside], kLearningReference * 4 / 8, 1e-9);
  const auto owed = mode_shares(measured({.harm = 0.1}, 0, contested, 1), robust, 0.05);
  EXPECT_NEAR(owed[kBeside], kLearningReference * 4 / 8, 1e-9);
  ModeCost uncontested = contested;
  uncontested.least_harm = 0.2;
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, uncontested, 1), robust)[kBeside],
              plain[kBeside], 1e-12);
  ModeCost enough = contested;
  enough.samples = 8;
  EXPECT_NEAR(mode_shares(measured({.harm = 0.1}, 0, enough, 1), robust)[kBeside], plain[kBeside],
              1e-12);
}

// Whatever the costs and gains, the loss stays within what the target allows as long as
// exploring alone does not exceed it.
TEST(ModeShares, TheLossNeverExceedsTheTarget) {
  for (double cg : {0.0, 0.01, 0.05, 0.1, 0.3, 0.6})
    for (double cb : {0.0, 0.01, 0.05, 0.1, 0.3, 0.6})
      for (double gg : {0.0, 0.1, 0.5})
        for (double gb : {0.0, 0.2, 0.9}) {
          const ModeMeasures m = measured({.harm = cg}, gg, {.harm = cb}, gb);
          const auto shares = mode_shares(m, settings());
          EXPECT_NEAR(shares[kPaused] + shares[kGated] + shares[kBeside], 1, 1e-9);
          EXPECT_GE(shares[kPaused], 0.05 - 1e-9);
          if (0.05 * (cg + cb) <= 0.05) {
            EXPECT_LE(loss(shares, m), 0.05 + 1e-9) << cg << " " << cb << " " << gg << " " << gb;
          }
        }
}

// What learning spent beyond the target is paid back by the periods after it.
TEST(ModeShares, ALossAlreadySpentIsPaidBack) {
  const ModeMeasures m = measured({.harm = 0.25}, 0.13, {.harm = 0.2}, 0.5);
  // 30 periods at equal shares: 30 x (0.25 + 0.2) / 3 = 4.5 periods' worth lost, 1.5 allowed.
  const double debt = loss_debt({10, 10, 10}, m, settings());
  EXPECT_NEAR(debt, (4.5 - 1.5) / kDebtHorizon, 1e-12);
  EXPECT_LT(mode_shares(m, settings(), debt)[kBeside], mode_shares(m, settings())[kBeside]);
  EXPECT_GE(mode_shares(m, settings(), debt)[kBeside], 0);
  // Nothing spent: no debt, and nothing banked either.
  EXPECT_EQ(loss_debt({30, 0, 0}, m, settings()), 0);
  // A mode not yet measured is left out: 10 beside periods at 0.2 lost 2, 20 periods allow 1.
  ModeMeasures unknown = m;
  unknown.cost[kGated].reset();
  EXPECT_NEAR(loss_debt({10, 10, 10}, unknown, settings()), (2 - 1) / kDebtHorizon, 1e-12);
  unknown.cost[kBeside].reset();
  EXPECT_EQ(loss_debt({10, 10, 10}, unknown, settings()), 0);
}

PairedDifferences differences(std::deque<double> paused_gated, std::deque<double> paused_beside,
                              std::deque<double> gated_beside) {
  PairedDifferences d;
  d[kPairPausedGated] = std::move(paused_gated);
  d[kPairPausedBeside] = std::move(paused_beside);
  d[kPairGatedBeside] = std::move(gated_beside);
  return d;
}

TEST(ModeCosts, AreOneLessTheSpeedRatioOfAdjacentPeriods) {
  const double l8 = std::log(0.8), l9 = std::log(0.9);
  // Two direct differences: not yet known.
  EXPECT_FALSE(mode_costs(differences({l9, l9}, {l8, l8}, {}))[kBeside]);
  const auto exact = mode_costs(differences({l9, l9, l9}, {l8, l8, l8}, {}));
  ASSERT_TRUE(exact[kBeside] && exact[kGated]);
  EXPECT_FALSE(exact[kPaused]);
  EXPECT_NEAR(exact[kBeside]->harm, 0.2, 1e-12);
  EXPECT_NEAR(exact[kGated]->harm, 0.1, 1e-12);
  EXPECT_NEAR(exact[kBeside]->error, 0, 1e-12);
  const auto noisy = mode_costs(differences({}, {l8 - 0.1, l8 + 0.1, l8 - 0.05, l8 + 0.05}, {}));
  ASSERT_TRUE(noisy[kBeside]);
  EXPECT_NEAR(noisy[kBeside]->harm, 0.2, 1e-12);
  EXPECT_GT(noisy[kBeside]->error, 0.02);
  EXPECT_LT(noisy[kBeside]->error, 0.1);
  EXPECT_FALSE(noisy[kGated]);  // never next to paused or beside
}

// A cost of kClearCost or more on each of two direct pairs is known at once: two such pairs are
// not noise, and a third learning period would cost production the most.
TEST(ModeCosts, TwoPairsThatEachReadALargeCostAreEnough) {
  const double clear = std::log(1 - kClearCost);
  const auto known = mode_costs(differences({}, {clear - 0.15, clear - 0.1}, {}));
  ASSERT_TRUE(known[kBeside]);
  EXPECT_NEAR(known[kBeside]->harm, 1 - std::exp(clear - 0.125), 1e-12);
  EXPECT_NEAR(known[kBeside]->samples, 2, 1e-12);
  // One pair of two within kClearCost, or a single pair however large: not yet.
  EXPECT_FALSE(mode_costs(differences({}, {clear - 0.3, clear + 0.05}, {}))[kBeside]);
  EXPECT_FALSE(mode_costs(differences({}, {-0.9}, {}))[kBeside]);
  // Against paused only: gated's pairs against beside do not count as its own.
  const auto through = mode_costs(differences({clear - 0.2, clear - 0.2}, {-0.5, -0.5}, {-0.1}));
  EXPECT_TRUE(through[kGated]);
}

// The shares leave few gated periods next to paused ones: gated is measured against beside,
// which is measured against paused.
TEST(ModeCosts, AModeIsMeasuredThroughTheOther) {
  const double l8 = std::log(0.8), l6 = std::log(0.6);
  const std::deque<double> b(6, l8), g_b(6, l8 - l6);
  // Six and six: as good as three direct differences (each indirect one carries both noises).
  EXPECT_FALSE(mode_costs(differences({}, {l8, l8, l8}, {l8 - l6, l8 - l6, l8 - l6}))[kGated]);
  const auto through = mode_costs(differences({}, b, g_b));
  ASSERT_TRUE(through[kGated]);
  EXPECT_NEAR(through[kGated]->harm, 0.4, 1e-12);
  // Direct and indirect evidence that disagree are weighed by their counts.
  const auto both = mode_costs(differences({0, 0, 0, 0, 0, 0}, {l8, l8, l8}, {l8, l8, l8}));
  ASSERT_TRUE(both[kGated] && both[kBeside]);
  EXPECT_GT(both[kGated]->harm, -1e-12);
  EXPECT_LT(both[kGated]->harm, 0.05);  // six direct differences say 0, three through beside 0
  EXPECT_NEAR(both[kBeside]->harm, 0.2, 0.05);
  EXPECT_GT(both[kBeside]->error, 0);  // the three pairs do not agree exactly
}

// A stalled period (a host-side pause) weighs no more than a factor of e.
TEST(ModeCosts, OneStalledPeriodIsClipped) {
  const auto stalled = mode_costs(differences({}, {0, 0, 0, -20}, {}));
  ASSERT_TRUE(stalled[kBeside]);
  EXPECT_NEAR(stalled[kBeside]->harm, 1 - std::exp(-kMaxDifference / 4), 1e-12);
}

// Robust costs: a stalled period among ordinary ones weighs as an ordinary bad one, where the mean
// read it as a 15 % cost; a cost every pair shows is read the same either way.
TEST(ModeCosts, RobustCostsTakeAStallAtTheEdgeOfTheSpread) {
  const PairedDifferences stall = differences({}, {-1.3, 0.02, -0.01, 0.03, 0.0, -0.02}, {});
  const auto mean = mode_costs(stall);
  const auto robust = mode_costs(stall, true);
  ASSERT_TRUE(mean[kBeside] && robust[kBeside]);
  EXPECT_GT(mean[kBeside]->harm, 0.14);
  EXPECT_LT(robust[kBeside]->harm, 0.03);
  EXPECT_GT(robust[kBeside]->harm, 0);  // still a little worse than without the stall
  const PairedDifferences real = differences({}, {-0.25, -0.3, -0.22, -0.28, -0.26}, {});
  EXPECT_NEAR(mode_costs(real, true)[kBeside]->harm, mode_costs(real)[kBeside]->harm, 1e-12);
  EXPECT_NEAR(mode_costs(real, true)[kBeside]->error, mode_costs(real)[kBeside]->error, 1e-12);
  // The least cost a direct pair read: the contest mode_shares rechecks.
  EXPECT_NEAR(robust[kBeside]->least_harm, 1 - std::exp(0.03), 1e-12);
  EXPECT_NEAR(mode_costs(real)[kBeside]->least_harm, 1 - std::exp(-0.22), 1e-12);
}

// Robust costs: two stalls, each at the clip, are not a clear cost (TwoPairsThatEachRead...): the
// cost waits for its third pair.
TEST(ModeCosts, RobustCostsDoNotTakeTwoStallsForAClearCost) {
  const PairedDifferences stalls = differences({}, {-1.3, -1.5}, {});
  EXPECT_TRUE(mode_costs(stalls)[kBeside]);
  EXPECT_FALSE(mode_costs(stalls, true)[kBeside]);
  EXPECT_TRUE(mode_costs(differences({}, {-0.4, -0.45}, {}), true)[kBeside]);
}

// Periods alternating between modes, `work` per second in each; the budget's own choice of the
// next mode is not followed, so that the test decides the order.
void period(ConcurrencyBudget& budget, uint64_t job, RunMode mode, double work) {
  budget.record_speed(job, mode, work / 2, 0.5e9);
  budget.record_speed(job, mode, work / 2, 0.5e9);
  budget.next_period(mode);
}

// A server (in flight half of its paused windows, the same work in every mode) that running
// beside slows by 40 %: beside runs one window at a time and never twice in a row, however far
// behind its share, each of its periods set against the paused one before it, while its cost is
// learnt and once it is known. A server that beside slows by 5 % meets it one window at a time
// only until its cost is known. A closed loop with the same gaps is treated alike (whether it
// queues the loss is not asked: a server's throughput is too noisy to tell); a loop in flight all
// the time keeps its periods long.
TEST(ConcurrencyBudget, ACostlyModeMeetsAServerOneWindowAtATime) {
  ConcurrencySettings s = settings();
  s.tail_factor = 1.2;
  // One window of `mode`, at `speed` in flight (solo: 1000 per second); a server does 500 a
  // window whatever its speed (in flight longer when slowed), a closed loop is in flight
  // `in_flight` of it and does less.
  auto window = [](ConcurrencyBudget& b, RunMode mode, double speed, bool server,
                   double in_flight) {
    if (mode == RunMode::paused) b.record_busy(mode, in_flight);
    const double busy_s = server ? 500 / speed : in_flight;
    b.record_speed(1, mode, speed * busy_s, busy_s * 1e9, 1e9);
  };
  for (const double beside_speed : {600.0, 950.0}) {
    ConcurrencyBudget server(s);
    window(server, RunMode::paused, 1000, true, 0.5);
    server.next_period(RunMode::paused);
    EXPECT_TRUE(server.brief(RunMode::beside));  // its cost not yet known
    EXPECT_FALSE(server.brief(RunMode::paused));
    for (int i = 0; i < 6; ++i) {
      window(server, RunMode::beside, beside_speed, true, 0.5);
      // Learning, beside is due 0.6 of the time: after its short period it is still behind.
      const RunMode next = server.next_period(RunMode::beside, 1.0 / 3);
      const bool known = server.measures().cost[kBeside].has_value();
      if (beside_speed < 900 || !known) {
        EXPECT_EQ(next, RunMode::paused) << beside_speed << " " << i;
      }
      window(server, RunMode::paused, 1000, true, 0.5);
      server.next_period(RunMode::paused);
    }
    const ModeMeasures m = server.measures();
    ASSERT_TRUE(m.cost[kBeside]);
    EXPECT_NEAR(m.cost[kBeside]->harm, 1 - beside_speed / 1000, 1e-9);
    EXPECT_TRUE(m.queues[kBeside]);
    EXPECT_EQ(server.brief(RunMode::beside), beside_speed < 900) << beside_speed;
  }
  for (const auto& [in_flight, what] : {std::pair{0.5, "a closed loop with gaps"},
                                        std::pair{1.0, "a loop in flight all the time"}}) {
    const bool gaps = in_flight < s.gaps_limit;
    ConcurrencyBudget loop(s);
    for (int i = 0; i < 4; ++i) {
      window(loop, RunMode::paused, 1000, false, in_flight);
      loop.next_period(RunMode::paused);
      window(loop, RunMode::beside, 600, false, in_flight);
      loop.next_period(RunMode::beside);
    }
    ASSERT_TRUE(loop.measures().cost[kBeside]) << what;
    EXPECT_EQ(loop.brief(RunMode::beside), gaps) << what;
  }
}

void measure(ConcurrencyBudget& budget, uint64_t job, double paused, double gated,
             double beside) {
  for (int i = 0; i < 4; ++i) {
    period(budget, job, RunMode::paused, paused);
    period(budget, job, RunMode::gated, gated);
    period(budget, job, RunMode::beside, beside);
  }
}

// Beside's cost is learnt until it rests on doubt_samples pairs of periods (the policy runs
// shorter periods meanwhile: learning_period_ms); gated's does not count.
TEST(ConcurrencyBudget, LearnsUntilBesidesCostRestsOnDoubtSamplesPairs) {
  ConcurrencySettings s = settings();
  s.doubt_samples = 6;
  ConcurrencyBudget budget(s);
  EXPECT_TRUE(budget.learning());
  for (int i = 0; i < 4; ++i) period(budget, 1, RunMode::gated, 90 + i);  // gated alone
  EXPECT_TRUE(budget.learning());
  budget.break_sequence();
  // Paused, then beside and paused in turn: every period after the first is a pair.
  period(budget, 1, RunMode::paused, 100);
  for (int pairs = 1; pairs <= 6; ++pairs) {
    period(budget, 1, pairs % 2 ? RunMode::beside : RunMode::paused, pairs % 2 ? 97 : 100);
    ASSERT_EQ(budget.measures().cost[kBeside].has_value(), pairs >= 3) << pairs;
    EXPECT_EQ(budget.learning(), pairs < 6) << pairs;
  }
  budget.retain({});  // a new production job is learnt afresh
  EXPECT_TRUE(budget.learning());
}

// A budget that has measured every mode: gated costs 25 % and gains 13 launches a window, beside
// 20 % and 50.
ConcurrencyBudget measured_budget() {
  ConcurrencyBudget budget(settings());
  measure(budget, 1, 100, 75, 80);
  for (int i = 0; i < 4; ++i) {
    budget.record_gain(RunMode::gated, 13);
    budget.record_gain(RunMode::beside, 50);
  }
  return budget;
}

TEST(ConcurrencyBudget, SpreadsEachModesPeriodsEvenly) {
  ConcurrencyBudget budget = measured_budget();
  RunMode mode = RunMode::paused;
  for (int i = 0; i < 400; ++i) mode = budget.next_period(mode);  // the learning's debt repaid
  const auto shares = budget.shares();
  std::array<int, kRunModes> count{};
  for (int i = 0; i < 800; ++i) ++count[static_cast<size_t>(mode = budget.next_period(mode))];
  for (size_t m = 0; m < kRunModes; ++m) EXPECT_NEAR(count[m], 800 * shares[m], 1.5);
  // And spread: no run of paused periods much longer than the share implies.
  int run = 0, longest = 0;
  for (int i = 0; i < 200; ++i) {
    run = (mode = budget.next_period(mode)) == RunMode::paused ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  EXPECT_LE(longest, static_cast<int>(shares[kPaused] / (1 - shares[kPaused])) + 2);
}

// Shares are of production's time: with paused periods half as long as the others, paused
// periods come twice as often for the same share of the time.
TEST(ConcurrencyBudget, SharesAreOfTimeWhateverEachPeriodsLength) {
  ConcurrencyBudget budget = measured_budget();
  auto length = [](RunMode m) { return m == RunMode::paused ? 0.5 : 1.0; };
  RunMode mode = RunMode::paused;
  for (int i = 0; i < 400; ++i) mode = budget.next_period(mode, length(mode));
  const auto shares = budget.shares();
  std::array<double, kRunModes> time{};
  double total = 0;
  for (int i = 0; i < 800; ++i) {
    const RunMode next = budget.next_period(mode, length(mode));
    time[static_cast<size_t>(mode)] += length(mode);
    total += length(mode);
    mode = next;
  }
  for (size_t m = 0; m < kRunModes; ++m) EXPECT_NEAR(time[m] / total, shares[m], 0.01) << m;
}

// Learning, paused and beside alternate whatever the paused period's length: every period after
// the first makes a pair. learning_share gives the paused share of the time that this takes.
TEST(ConcurrencyBudget, LearningAlternatesWithShorterPausedPeriods) {
  EXPECT_DOUBLE_EQ(learning_share(0.5, 1), 0.5);
  EXPECT_NEAR(learning_share(0.5, 2.0 / 3), 0.4, 1e-12);
  EXPECT_NEAR(learning_share(0.25, 0.5), 0.125 / 0.875, 1e-12);
  EXPECT_EQ(learning_share(0, 0.5), 0);
  ConcurrencySettings s = settings();
  s.reference_length = 2.0 / 3;
  ConcurrencyBudget budget(s);
  RunMode mode = RunMode::paused;
  for (int i = 0; i < 12; ++i) {
    const RunMode next = budget.next_period(mode, mode == RunMode::paused ? 2.0 / 3 : 1.0);
    EXPECT_NE(next, mode) << i;
    EXPECT_NE(next, RunMode::gated) << i;
    mode = next;
  }
}

// After production's return from a long idle, a paused period due then gives way to a mode that
// runs the opportunistic jobs where that mode is due too (harvest.cpp: the return's first windows
// must not be the reference). With paused and beside alone, paused is due only where beside is
// not: it stays. With gated too, some returns resume in gated or beside.
TEST(ConcurrencyBudget, AReturnResumesInAModeDueThatRunsTheOpportunisticJobs) {
  ConcurrencyBudget learning(settings());
  RunMode mode = RunMode::paused;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(learning.resume_mode(mode), mode) << i;
    mode = learning.next_period(mode, mode == RunMode::paused ? 0.5 : 1.0);
  }
  ConcurrencyBudget budget = measured_budget();
  for (int i = 0; i < 400; ++i) mode = budget.next_period(mode);  // the learning's debt repaid
  ASSERT_GT(budget.shares()[kGated], 0);
  int resumed = 0;
  for (int i = 0; i < 400; ++i) {
    const RunMode resume = budget.resume_mode(mode);
    if (mode != RunMode::paused) {
      EXPECT_EQ(resume, mode);
    }
    resumed += resume != mode;
    mode = budget.next_period(mode);
  }
  EXPECT_GT(resumed, 0);
}

// fits_target: a mode whose cost, as the shares charge it, fits the target over all of
// production's time (the harvest policy then does not hold the opportunistic jobs at production's
// return into it). Paused always; a cost not yet known never.
TEST(ConcurrencyBudget, AModeFitsTheTargetWhereItsChargedCostIsWithinTheAllowance) {
  ConcurrencyBudget unknown(settings());
  EXPECT_TRUE(unknown.fits_target(RunMode::paused));
  EXPECT_FALSE(unknown.fits_target(RunMode::beside));
  // Paused and beside in turn, beside 1 % slower: it fits.
  ConcurrencyBudget cheap(settings());
  for (int i = 0; i < 8; ++i) {
    period(cheap, 1, RunMode::paused, 100);
    period(cheap, 1, RunMode::beside, 99);
  }
  EXPECT_TRUE(cheap.fits_target(RunMode::beside));
  EXPECT_FALSE(cheap.fits_target(RunMode::gated));  // not measured
  // 20 % slower: it does not.
  ConcurrencyBudget costly(settings());
  for (int i = 0; i < 8; ++i) {
    period(costly, 1, RunMode::paused, 100);
    period(costly, 1, RunMode::beside, 80);
  }
  EXPECT_FALSE(costly.fits_target(RunMode::beside));
  // Nor a cheap mode while production is owed what a costly one took (the debt): gated 25 %
  // slower ran a third of these periods.
  ConcurrencyBudget owed(settings());
  measure(owed, 1, 100, 75, 99);
  EXPECT_FALSE(owed.fits_target(RunMode::beside));
  EXPECT_FALSE(owed.fits_target(RunMode::gated));
}

TEST(ConcurrencyBudget, TheCostliestProductionJobDecidesAndGoneJobsAreForgotten) {
  ConcurrencyBudget budget(settings());
  measure(budget, 1, 100, 100, 100);
  measure(budget, 2, 100, 100, 60);
  ASSERT_TRUE(budget.measures().cost[kBeside]);
  EXPECT_NEAR(budget.measures().cost[kBeside]->harm, 0.4, 1e-9);
  budget.retain({1});
  EXPECT_NEAR(budget.measures().cost[kBeside]->harm, 0, 1e-9);
  // A production job not yet measured leaves the costs unknown: every mode is measured again.
  budget.record_speed(3, RunMode::paused, 100, 1e9);
  EXPECT_FALSE(budget.measures().cost[kBeside]);
  // The in-flight reading goes with a job that left; one that stays keeps it.
  for (int i = 0; i < 3; ++i) budget.record_busy(RunMode::paused, 1.0);
  budget.retain({1, 3});
  EXPECT_EQ(budget.measures().busy, 1.0);
  budget.retain({3});
  EXPECT_FALSE(budget.measures().busy);
}

// job_cost: the cost in throughput counts only where it shows a loss beyond the target's
// allowance that the speed in flight does not; a noisy throughput (a server's arrivals) does not.
TEST(JobCost, ThroughputCountsOnlyBeyondTheAllowanceAndTheSpeedInFlight) {
  ConcurrencySettings s = settings();
  s.throughput_cost = true;
  const ModeCost in_flight{.harm = 0.04, .error = 0.03, .samples = 10};
  const ModeCost cpu_side{.harm = 0.10, .error = 0.02, .samples = 10};  // low: 0.08
  const ModeCost noisy{.harm = 0.18, .error = 0.20, .samples = 10};     // low: 0
  const ModeCost within{.harm = 0.06, .error = 0.02, .samples = 10};    // low: 0.04 <= 0.05
  EXPECT_EQ(job_cost(in_flight, cpu_side, s)->harm, 0.10);
  EXPECT_EQ(job_cost(in_flight, noisy, s)->harm, 0.04);
  EXPECT_EQ(job_cost(in_flight, within, s)->harm, 0.04);
  // Not beyond the cost in flight taken as low: a saturating job's 0.24 +- 0.06 in flight keeps it.
  const ModeCost saturating{.harm = 0.24, .error = 0.06, .samples = 10};
  EXPECT_EQ(job_cost(saturating, ModeCost{.harm = 0.29, .error = 0.12, .samples = 10}, s)->harm,
            0.24);
  EXPECT_FALSE(job_cost(std::nullopt, cpu_side, s));  // not known in flight: not known
  EXPECT_EQ(job_cost(in_flight, std::nullopt, s)->harm, 0.04);
  s.throughput_cost = false;
  EXPECT_EQ(job_cost(in_flight, cpu_side, s)->harm, 0.04);
}

ConcurrencyBudget with_throughput_cost(bool on) {
  ConcurrencySettings s = settings();
  s.throughput_cost = on;
  return ConcurrencyBudget(s);
}

// A launch-bound job with CPU work between its kernels (on the H100, mobilenet_v2 b16 with 10 ms
// pauses, §4t): beside, it completes 10 % fewer kernels per window at the same speed in flight,
// because it has work in flight for less of each window. The speed in flight reads no cost and
// beside takes all but the reference; with throughput_cost the 10 % counts and beside is held to
// what the target allows.
TEST(ConcurrencyBudget, ACostOnTheCpuSideCountsWithThroughputCost) {
  auto run = [](bool throughput_cost) {
    ConcurrencyBudget budget = with_throughput_cost(throughput_cost);
    for (int i = 0; i < 24; ++i) {
      const bool beside = i % 2 == 1;
      const double noise = 1 + 0.02 * ((i * 7) % 5 - 2);  // deterministic, a few percent
      const double window_ns = 50e6;
      const double busy_ns = (beside ? 0.9 : 1.0) * 0.65 * window_ns;
      const double work = 23.0 * busy_ns / 1e6 * noise;  // 23 kernels per ms in flight
      for (int w = 0; w < 3; ++w)
        budget.record_speed(1, beside ? RunMode::beside : RunMode::paused, work, busy_ns,
                            window_ns);
      budget.record_gain(beside ? RunMode::beside : RunMode::paused, beside ? 900 : 0);
      budget.next_period(beside ? RunMode::beside : RunMode::paused);
    }
    return std::pair{budget.measures().cost[kBeside], budget.shares()[kBeside]};
  };
  const auto [in_flight_cost, in_flight_share] = run(false);
  const auto [throughput_cost, throughput_share] = run(true);
  ASSERT_TRUE(in_flight_cost && throughput_cost);
  EXPECT_NEAR(in_flight_cost->harm, 0, 0.02);
  EXPECT_NEAR(throughput_cost->harm, 0.1, 0.02);
  EXPECT_GT(in_flight_share, 0.9);
  EXPECT_LT(throughput_share, 0.6);
}

// Lost work must show beyond two standard errors of the throughput (kLostWorkMargin): a Poisson
// server's throughput follows its arrivals, and a 25 % loss read +- 6 % from few pairs is no
// proof; read +- 2 % it is. Unknown, a server is assumed.
TEST(QueuesTheLoss, AsksForLostWorkBeyondTwoErrors) {
  const ConcurrencySettings s = settings();
  const ModeCost in_flight{.harm = 0.30, .error = 0.02};  // taken low: 0.28; half of it 0.14
  EXPECT_TRUE(queues_the_loss(ModeCost{.harm = 0.25, .error = 0.06}, in_flight, s));   // 0.13
  EXPECT_FALSE(queues_the_loss(ModeCost{.harm = 0.25, .error = 0.02}, in_flight, s));  // 0.21
  EXPECT_TRUE(queues_the_loss(ModeCost{.harm = 0.0, .error = 0.3}, in_flight, s));
  EXPECT_TRUE(queues_the_loss(std::nullopt, in_flight, s));
}

// Whether production queues a mode's loss (ModeMeasures::queues): a server does the work its
// requests bring in every mode, in more busy time where it is slowed (its throughput, kernels per
// window, unchanged); a closed loop with the same gaps does less work in the same busy time.
TEST(ConcurrencyBudget, AServerQueuesAModesLossAClosedLoopLosesTheWork) {
  auto run = [](bool server) {
    ConcurrencyBudget budget(settings());
    for (int i = 0; i < 12; ++i) {
      const bool beside = i % 2 == 1;
      const double noise = 1 + 0.02 * ((i * 7) % 5 - 2);  // deterministic, a few percent
      const double window_ns = 50e6;
      // Solo: 20 kernels per ms in flight, half of each window in flight; beside 30 % slower.
      const double speed = (beside ? 0.7 : 1.0) * 20 * noise;
      const double busy_ns = server && beside ? 0.5 * window_ns / 0.7 : 0.5 * window_ns;
      const RunMode mode = beside ? RunMode::beside : RunMode::paused;
      for (int w = 0; w < 3; ++w)
        budget.record_speed(1, mode, speed * busy_ns / 1e6, busy_ns, window_ns);
      budget.next_period(mode);
    }
    const ModeMeasures m = budget.measures();
    EXPECT_TRUE(m.cost[kBeside]);
    if (m.cost[kBeside]) {
      EXPECT_NEAR(m.cost[kBeside]->harm, 0.3, 0.03) << server;
    }
    return m.queues[kBeside];
  };
  EXPECT_TRUE(run(true));
  EXPECT_FALSE(run(false));
}

// A job in flight all of every window reads the same cost either way.
TEST(ConcurrencyBudget, AJobInFlightAllTheTimeReadsTheSameCostEitherWay) {
  auto cost = [](bool throughput_cost) {
    ConcurrencyBudget budget = with_throughput_cost(throughput_cost);
    for (int i = 0; i < 24; ++i) {
      const RunMode mode = i % 2 ? RunMode::beside : RunMode::paused;
      const double work = (i % 2 ? 0.8 : 1.0) * 1000 * (1 + 0.02 * ((i * 3) % 5 - 2));
      budget.record_speed(1, mode, work, 50e6, 50e6);
      budget.next_period(mode);
    }
    return budget.measures().cost[kBeside]->harm;
  };
  EXPECT_DOUBLE_EQ(cost(true), cost(false));
}

// Production's speed wanders far more between periods seconds apart than between adjacent ones
// (on the H100: 0.21 against 0.085 in log speed). Here it doubles over the run while running
// beside costs it 10 %: set against the period before, the cost is read exactly, where the mean of
// the paused periods against the mean of the beside ones would be off by the drift.
TEST(ConcurrencyBudget, ADriftingSpeedCancelsInEachDifference) {
  ConcurrencyBudget budget(settings());
  double speed = 1000;
  for (int i = 0; i < 60; ++i) {
    const RunMode mode = i % 10 == 0   ? RunMode::paused
                         : i % 10 == 5 ? RunMode::gated
                                       : RunMode::beside;
    const double cost = mode == RunMode::beside ? 0.1 : mode == RunMode::gated ? 0.3 : 0;
    period(budget, 1, mode, speed * (1 - cost));
    speed *= 1.012;
  }
  const ModeMeasures m = budget.measures();
  ASSERT_TRUE(m.cost[kBeside] && m.cost[kGated]);
  // The drift within one period's step (1.2 %) is all that is left.
  EXPECT_NEAR(m.cost[kBeside]->harm, 0.1, 0.015);
  EXPECT_NEAR(m.cost[kGated]->harm, 0.3, 0.015);
}

// Nothing is set against a period before an idle phase or a change of mechanism, nor against a
// period that was not measured.
TEST(ConcurrencyBudget, APeriodIsSetOnlyAgainstTheOneJustBefore) {
  ConcurrencyBudget budget(settings());
  for (int i = 0; i < 5; ++i) {
    period(budget, 1, RunMode::paused, 1000);
    budget.break_sequence();  // production idled: its next phase may run at another speed
    period(budget, 1, RunMode::beside, 500);
    budget.next_period(RunMode::gated);  // no window of job 1 measured
  }
  EXPECT_FALSE(budget.measures().cost[kBeside]);
  for (int i = 0; i < 3; ++i) {
    period(budget, 1, RunMode::paused, 1000);
    period(budget, 1, RunMode::beside, 900);
  }
  ASSERT_TRUE(budget.measures().cost[kBeside]);
  EXPECT_NEAR(budget.measures().cost[kBeside]->harm, 0.1, 1e-9);
}

// A cost is measured over the last `samples` differences of each pair: an older load is forgotten
// after them, and a longer memory keeps it (harvest's cost_samples).
TEST(ConcurrencyBudget, ACostRemembersItsLastSamplesDifferences) {
  for (size_t memory : {size_t{16}, size_t{48}}) {
    ConcurrencySettings s = settings();
    s.samples = memory;
    ConcurrencyBudget budget(s);
    for (int i = 0; i < 40; ++i) {  // 80 paused-beside differences: beside costs 30 %...
      period(budget, 1, RunMode::paused, 1000);
      period(budget, 1, RunMode::beside, 700);
    }
    for (int i = 0; i < 10; ++i) {  // ...then 20 more at no cost
      period(budget, 1, RunMode::paused, 1000);
      period(budget, 1, RunMode::beside, 1000);
    }
    const ModeMeasures m = budget.measures();
    ASSERT_TRUE(m.cost[kBeside]);
    EXPECT_DOUBLE_EQ(m.cost[kBeside]->samples, static_cast<double>(memory)) << memory;
    // 16: recent differences alone; 48: 29 at log(0.7) among them (the 28 last of the costly
    // load and the first free paused period set against its last costly beside one).
    const double expected = memory == 16 ? 0 : 1 - std::exp(29 * std::log(0.7) / 48);
    EXPECT_NEAR(m.cost[kBeside]->harm, expected, 1e-9) << memory;
  }
}

// loop_left: only where the paused windows read no gaps and the others, which can only be
// busier, clearly show some.
TEST(ConcurrencyBudget, ALoopLeftWhereItsOtherWindowsShowGaps) {
  const ConcurrencySettings s = settings();  // gaps_limit 0.9
  EXPECT_TRUE(loop_left(1.0, 0.7, s));
  EXPECT_TRUE(loop_left(0.95, 0.84, s));
  EXPECT_FALSE(loop_left(1.0, 0.86, s));  // within kLoopLeftMargin
  EXPECT_FALSE(loop_left(0.8, 0.5, s));   // read as leaving gaps already
  EXPECT_FALSE(loop_left(std::nullopt, 0.5, s));
  EXPECT_FALSE(loop_left(1.0, std::nullopt, s));
}

// What the budget learnt of a loop is dropped once samples (16) windows of the other modes with
// work show gaps; the paused windows' reading goes with it. Windows left part-way (not working)
// and paused ones do not count toward it.
TEST(ConcurrencyBudget, WhatALoopTaughtIsDroppedWhenItLeavesGaps) {
  ConcurrencyBudget budget(settings());
  for (int i = 0; i < 4; ++i) {
    period(budget, 1, RunMode::paused, 1000);
    budget.record_busy(RunMode::paused, 1.0);
    period(budget, 1, RunMode::beside, 950);
    budget.record_busy(RunMode::beside, 1.0);
  }
  budget.record_gain(RunMode::beside, 80);
  ASSERT_TRUE(budget.measures().cost[kBeside]);
  ASSERT_EQ(budget.measures().busy, 1.0);
  for (size_t i = 0; i < 16; ++i) budget.record_busy(RunMode::beside, 0.2, false);
  for (size_t i = 0; i < 16; ++i) budget.record_busy(RunMode::paused, 0.95);
  EXPECT_EQ(budget.relearnt(), 0);
  // 4 windows beside so far, in flight all of each: 12 more with gaps fill the 16.
  for (size_t i = 0; i < 11; ++i) {
    budget.record_busy(RunMode::beside, 0.6);
    EXPECT_EQ(budget.relearnt(), 0) << i;
  }
  budget.record_busy(RunMode::beside, 0.6);
  EXPECT_EQ(budget.relearnt(), 1);
  const ModeMeasures m = budget.measures();
  EXPECT_FALSE(m.cost[kBeside]);
  EXPECT_FALSE(m.gain[kBeside]);
  EXPECT_FALSE(m.busy);
}

// speed_jumped: a paused period whose work per window is more than e^2 (kJumpWork) and whose
// speed in flight is more than e (kMaxDifference) above the medians of at least kJumpPeriods
// earlier ones; a slower one never.
TEST(ConcurrencyBudget, ASoloSpeedJumpsWhereItsWorkAndSpeedBothDo) {
  auto at = [](double in_flight, double throughput) {
    return PeriodSpeeds{.in_flight = std::log(in_flight), .throughput = std::log(throughput)};
  };
  // A trickle: about 1 kernel per ms in flight, 3 a window.
  const std::deque<PeriodSpeeds> trickle{at(1.0, 3), at(1.2, 5), at(0.9, 2)};
  EXPECT_TRUE(speed_jumped(trickle, at(30, 1400)));  // the work
  const double e = std::exp(kMaxDifference), e2 = std::exp(kJumpWork);
  EXPECT_TRUE(speed_jumped(trickle, at(1.01 * e, 3.01 * e2)));
  EXPECT_FALSE(speed_jumped(trickle, at(0.99 * e, 1400)));  // the speed in flight within e
  EXPECT_FALSE(speed_jumped(trickle, at(30, 2.99 * e2)));   // the work per window within e^2
  EXPECT_FALSE(speed_jumped(trickle, at(0.01, 0.03)));      // a stall
  // A loop's returns from idle at 0.3 of its speed (work and speed alike, within e^1.2).
  const std::deque<PeriodSpeeds> returns{at(9, 450), at(30, 1500), at(9, 450), at(9, 450)};
  EXPECT_FALSE(speed_jumped(returns, at(30, 1500)));
  // A server whose load grows tenfold: its work per window does, its speed in flight not.
  const std::deque<PeriodSpeeds> light{at(20, 50), at(21, 60), at(19, 40)};
  EXPECT_FALSE(speed_jumped(light, at(20, 500)));
  // Two periods make no median: one of them may be odd (a job's warm-up steps at 28 kernels per
  // ms and the window they ended in at 4, then its work at 40).
  EXPECT_FALSE(speed_jumped({at(28, 1400), at(4, 16)}, at(40, 2000)));
}

// A production job that trickles a few kernels a window (its start-up, after the warm-up) and
// then starts its work: the pairs read from the trickle, which make beside's cost a noise the
// budget cannot give the doubt to, are dropped at the first paused period at the new speed, and
// the cost is learnt from the work's periods alone. A job whose paused periods spread and stall
// (down to a tenth) is never taken for one that changed.
TEST(ConcurrencyBudget, AStartUpThatOutlastsTheWarmUpIsNotWhatIsLearnt) {
  ConcurrencyBudget budget(settings());
  const std::array<double, 4> trickle_beside{0.4, 3.0, 0.5, 2.5};  // kernels per ms, noise
  for (double beside : trickle_beside) {
    period(budget, 1, RunMode::paused, 1000);
    period(budget, 1, RunMode::beside, beside * 1000);
  }
  budget.record_gain(RunMode::beside, 5);
  budget.record_gain(RunMode::beside, 5);
  budget.record_gain(RunMode::beside, 5);
  const ModeMeasures trickled = budget.measures();
  ASSERT_TRUE(trickled.cost[kBeside]);
  EXPECT_GT(trickled.cost[kBeside]->error, 0.1);  // beyond the doubt: held at its high reading
  EXPECT_LT(budget.shares()[kBeside], 0.1);
  EXPECT_EQ(budget.relearnt(), 0);
  period(budget, 1, RunMode::paused, 30'000);  // the work begins
  EXPECT_EQ(budget.relearnt(), 1);
  EXPECT_FALSE(budget.measures().cost[kBeside]);
  EXPECT_FALSE(budget.measures().gain[kBeside]);
  for (int i = 0; i < 4; ++i) {
    period(budget, 1, RunMode::beside, 29'400);
    budget.record_gain(RunMode::beside, 80);
    period(budget, 1, RunMode::paused, 30'000);
  }
  const ModeMeasures m = budget.measures();
  ASSERT_TRUE(m.cost[kBeside]);
  EXPECT_NEAR(m.cost[kBeside]->harm, 0.02, 1e-9);
  EXPECT_EQ(budget.relearnt(), 1);

  ConcurrencyBudget steady(settings());
  const std::array<double, 8> paused{1000, 1200, 850, 100, 1150, 900, 1250, 1000};
  for (int round = 0; round < 4; ++round)
    for (double speed : paused) {
      period(steady, 1, RunMode::paused, speed);
      period(steady, 1, RunMode::beside, 950);
    }
  EXPECT_EQ(steady.relearnt(), 0);
}

// The climb of call 103 (S1b, four H200s): kernels per ms in flight of the job's windows with
// progress at the warm-up's end, then its work. Still climbing while its last three windows'
// median stands more than e^0.5 above the three before; a steady job's noise, a dip (a stall, a
// phase's end) and a slow rise are no climb, and six windows are needed to tell.
TEST(ConcurrencyBudget, AStartUpStillClimbsWhileItsSpeedRisesByMoreThanItsNoise) {
  auto logs = [](std::initializer_list<double> speeds) {
    std::deque<double> out;
    for (double s : speeds) out.push_back(std::log(s));
    return out;
  };
  EXPECT_TRUE(still_climbing(logs({0.5, 2.0, 9.0, 5.7, 3.6, 27})));
  EXPECT_TRUE(still_climbing(logs({9.0, 5.7, 3.6, 27, 33, 35})));
  EXPECT_TRUE(still_climbing(logs({5.7, 3.6, 27, 33, 35, 24})));
  EXPECT_FALSE(still_climbing(logs({3.6, 27, 33, 35, 24, 23})));  // settled: 27, then 24
  EXPECT_FALSE(still_climbing(logs({30, 27, 33, 36, 25, 31})));   // steady, +-15 %
  EXPECT_FALSE(still_climbing(logs({30, 31, 29, 3, 2, 30})));     // a dip
  EXPECT_FALSE(still_climbing(logs({20, 21, 22, 25, 27, 29})));   // a slow rise (e^0.25)
  const double e = std::exp(kSettleRise);
  EXPECT_TRUE(still_climbing(logs({10, 10, 10, 10.1 * e, 10.1 * e, 10})));
  EXPECT_FALSE(still_climbing(logs({10, 10, 10, 9.9 * e, 9.9 * e, 10})));
  EXPECT_FALSE(still_climbing(logs({3.6, 27, 33, 35, 36})));  // five windows tell nothing
  EXPECT_FALSE(still_climbing({}));
}

TEST(ConcurrencyBudget, AWindowWithoutWorkOrBusyTimeSaysNothing) {
  ConcurrencyBudget budget(settings());
  for (int i = 0; i < 3; ++i) {
    budget.record_speed(1, RunMode::paused, 0, 1e9);
    budget.next_period(RunMode::paused);
    budget.record_speed(1, RunMode::beside, 100, 0);
    budget.next_period(RunMode::beside);
    period(budget, 1, RunMode::gated, 100);
  }
  EXPECT_FALSE(budget.measures().cost[kBeside]);
  EXPECT_FALSE(budget.measures().cost[kGated]);
  // Nor within a period of measured windows: work without busy time would raise the period's
  // speed, busy time without work lower it.
  for (const auto& [work, busy_ns] : {std::pair{900.0, 0.0}, std::pair{0.0, 1e9}}) {
    ConcurrencyBudget mixed(settings());
    for (int i = 0; i < 3; ++i) {
      period(mixed, 1, RunMode::paused, 1000);
      mixed.record_speed(1, RunMode::beside, 900, 1e9);
      mixed.record_speed(1, RunMode::beside, work, busy_ns);
      mixed.next_period(RunMode::beside);
    }
    ASSERT_TRUE(mixed.measures().cost[kBeside]);
    EXPECT_NEAR(mixed.measures().cost[kBeside]->harm, 0.1, 1e-9) << work << " " << busy_ns;
  }
}

// The queue bounds beside production (ms) the in-flight share the policy's trace gives allows
// (" busy=X", of its paused windows, to two decimals; "?": not yet read): beside_queue_ms at the
// defaults, at the least and the most share that rounds to X.
std::pair<double, double> traced_beside_ms(const std::string& explain) {
  const size_t at = explain.find(" busy=");
  if (at == std::string::npos || explain.compare(at + 6, 1, "?") == 0) return {8, 8};
  const double busy = std::stod(explain.substr(at + 6));
  return {beside_queue_ms(busy - 0.005, 0.9, 8, 16), beside_queue_ms(busy + 0.005, 0.9, 8, 16)};
}

// `harvest` with concurrency=1 beside a production job whose speed (kernels per busy second) is
// (1 - cost) of its solo speed in each mode, ±10 % per window, and an opportunistic job that
// launches `gain` x 100 kernels per window in each mode. `closed_loop`: production is busy all
// the time and does less work when slowed (a training loop); otherwise it does fixed work per
// window and is busy longer when slowed (a server at 40 % load).
struct Case {
  double gated_cost, gated_gain, beside_cost, beside_gain;
  bool closed_loop = true;
  double spread = 0.1;     // each window's speed: uniform within +-spread of its mode's
  int slow_window = 0;     // every this many windows one at 0.3 of the speed (a phase's start)
  int phase_windows = 0;   // production busy this many windows, then idle as many (0: always busy)
  int gap_windows = 0;     // with phase_windows: idle this many windows instead
  int ramp_windows = 0;    // the first windows of each busy phase at 0.3 of the speed, every mode
  bool on_mps = false;     // concurrency=2 (the installed default) with an MPS client
  // First, production busy this many windows while the opportunistic job, registered, idles
  // (starting up); the phases follow.
  int idle_windows = 0;
  // Production's speed also wanders slowly, in every mode: the log of its speed follows a
  // mean-reverting walk with this standard deviation and a correlation time of 2 s (on the H100
  // about 0.2: resnet50 b8 training beside an MPS client).
  double drift = 0;
  // ... and jitters: the same walk with a correlation time of 2 windows (100 ms). On the H100
  // (S5, 2026-11-26, calls 37-45) a resnet50 b8 training job's pairs of adjacent paused and
  // beside periods spread by 0.09-0.37 in log speed with two measured windows each and by
  // 0.11-0.35 with three (tools/bench/period_noise.py): most of that noise is of the period, not
  // of the window, and does not average down over a period's windows.
  double jitter = 0;
  // Production's start-up: over its first this many busy windows its speed climbs from 0.1 of its
  // steady speed, whatever the mode (on the H200: 5, 15, 30, then 40 kernels/ms).
  int start_up_windows = 0;
  // ... or it trickles: its first this many busy windows (after start_up_windows) it is in
  // flight 5 % of each at 0.05 of its steady speed, times a factor from e^-1.5 to e^1.5 (loading,
  // compiling, a few probes a window; on the H200 in S5, call 99: 1-4 kernels a window, 0.3-16
  // kernels per ms against 25-34 after), whatever the mode.
  int trickle_windows = 0;
  // ... and then climbs: over this many busy windows (after the trickle) its speed and its share of
  // each window in flight rise together, by the same factor each window, from the trickle's 0.05
  // to 1 (on the H200 in S1b, call 103: 0.5-2 kernels per ms in flight, then 9, 6, 4, 27, 33, 35,
  // in flight 4-9 ms of each 50 ms window, then 30-49).
  int climb_windows = 0;
  double warm_up_ms = 750;          // the policy's warm_up_ms (its default)
  double learning_period_ms = 150;  // the policy's learning_period_ms (its default)
  double reference_period_ms = 100;  // the policy's reference_period_ms (its default)
  unsigned seed = 7;        // of the noise
  // A closed loop with CPU work between its kernels: it has work in flight this share of each
  // busy window, and beside (1 - cpu_side_cost) of that, at the same speed in flight (on the H100
  // a launch-bound mobilenet_v2 b16 job with 10 ms CPU pauses: in flight about 0.65 of each
  // window, 10-14 % fewer steps beside transformer training; §4t).
  double in_flight_share = 1;
  double cpu_side_cost = 0;
  bool throughput_cost = false;  // the policy's throughput_cost
  // Stalls: each busy window, in every mode alike, runs at kDipSpeed of its speed with this
  // probability (on the H100 1.1-2.4 % of a resnet50 b8 job's windows ran at less than 0.6 of the
  // windows around them, paused too; "Robust costs").
  double dip_rate = 0;
  bool robust_costs = false;  // the policy's robust_costs
  double tail_factor = 1.2;   // the policy's tail_factor (its default)
  double clear_margin = 2;    // the policy's clear_margin (its default)
  // A server with a queue (closed_loop false): requests bring 0.4 of a window's work at its solo
  // speed each window (`burst_load` instead for `burst_windows` from window `burst_from`), what
  // it cannot serve waits for the next window, and it is in flight while it serves. In a gated
  // window after one it spent in flight at least 0.9 of (a queue building, its gaps short) it runs
  // at `gated_saturated_speed` of its speed: the opportunistic job's kernels slip into each short
  // gap and slow the requests behind them (on the H100, S2 call 87, about half).
  bool queue = false;
  double load = 0.4;
  double burst_load = 0;
  int burst_from = 0, burst_windows = 0;
  double gated_saturated_speed = 1;
  // First, production a closed loop in flight all of each window for this many windows (a
  // server whose queue is full from its start), which running beside slows by
  // `loop_beside_cost`; the server after them.
  int loop_windows = 0;
  double loop_beside_cost = 0;
};
constexpr double kDipSpeed = 0.25;
struct Outcome {
  double production = 0;     // production's mean speed over its solo speed
  double opportunistic = 0;  // the opportunistic job's mean gain
  double paused = 0;         // share of production's measured busy windows paused
  double beside = 0;         // ... and beside
  int longest_beside = 0;    // the most busy windows in a row beside, over the whole run
  int saturated = 0;         // busy windows production spent in flight at least 0.9 of
  int held = 0;              // a queueing server's windows the trace names held (" held")
  int relearnt = 0;          // times the budget learnt again (the trace's " relearnt=N")
};

Outcome run_concurrency(const Case& c, int seconds = 60, int measured_from_s = 10) {
  Parameters parameters{{"concurrency", c.on_mps ? 2 : 1},
                        {"in_flight", 4},
                        {"learning_period_ms", c.learning_period_ms},
                        {"reference_period_ms", c.reference_period_ms},
                        {"warm_up_ms", c.warm_up_ms},
                        {"throughput_cost", c.throughput_cost ? 1 : 0},
                        {"robust_costs", c.robust_costs ? 1 : 0},
                        {"tail_factor", c.tail_factor},
                        {"clear_margin", c.clear_margin}};
  if (c.on_mps) parameters["kernel_gating"] = 1;
  auto made = make_policy("harvest", parameters);
  EXPECT_TRUE(made.policy) << made.error;
  constexpr uint64_t kWindowNs = 50'000'000;
  constexpr double kSpeed = 20'000;  // kernels per busy second, solo
  std::mt19937 random(c.seed);
  std::uniform_real_distribution<double> noise(1 - c.spread, 1 + c.spread);
  std::uniform_real_distribution<double> chance(0, 1);
  std::normal_distribution<double> step(0, 1);
  constexpr double kDriftWindows = 40;
  double wander = 0;  // log of the drift's factor
  constexpr double kJitterWindows = 2;
  double shake = 0;  // log of the jitter's factor
  int busy_windows = 0;
  Gate opportunistic_gate{.job_id = 2, .paused = true};
  double relative_speed = 0, gain = 0, paused = 0, beside = 0;  // summed over the windows measured
  int windows = 0, beside_run = 0, longest_beside = 0, saturated = 0, held = 0;
  double backlog = 0;          // a queueing server's work waiting (Case::queue)
  bool was_saturated = false;  // ... and whether it was in flight 0.9 of the last window
  for (int t = 0; t < seconds * 20; ++t) {
    const bool starting = t < c.idle_windows;  // idle by its own choice: no launch, no wait
    const int after_start = t - c.idle_windows;
    const int cycle = c.phase_windows + (c.gap_windows ? c.gap_windows : c.phase_windows);
    const int in_phase = starting ? c.phase_windows : c.phase_windows ? after_start % cycle : t;
    const bool busy = starting || !c.phase_windows || in_phase < c.phase_windows;
    const RunMode mode = opportunistic_gate.paused                 ? RunMode::paused
                         : opportunistic_gate.production_idle_only ? RunMode::gated
                                                                   : RunMode::beside;
    const bool looping = t < c.loop_windows;
    const bool closed_loop = c.closed_loop || looping;
    const double cost = mode == RunMode::paused  ? 0
                        : mode == RunMode::gated ? c.gated_cost
                        : looping                ? c.loop_beside_cost
                                                 : c.beside_cost;
    const double mode_gain = mode == RunMode::paused ? 0
                             : mode == RunMode::gated ? c.gated_gain
                                                      : c.beside_gain;
    // A ramp follows an idle phase (the GPU's clocks fell), not production's busy start-up.
    const bool ramp = c.phase_windows && in_phase < c.ramp_windows && after_start >= cycle;
    const double slow = (c.slow_window && t % c.slow_window == 0) || ramp ? 0.3
                        : c.dip_rate > 0 && chance(random) < c.dip_rate   ? kDipSpeed
                                                                          : 1.0;
    const double start_up =
        busy_windows < c.start_up_windows ? 0.1 + 0.9 * busy_windows / c.start_up_windows : 1.0;
    const bool trickling =
        busy_windows < c.start_up_windows + c.trickle_windows && busy_windows >= c.start_up_windows;
    const int climbed = busy_windows - c.start_up_windows - c.trickle_windows;
    const bool climbing = climbed >= 0 && climbed < c.climb_windows;
    const double climb =
        climbing ? std::pow(0.05, 1 - static_cast<double>(climbed + 1) / (c.climb_windows + 1)) : 1;
    const double trickle = trickling ? 0.05 * std::exp(3 * chance(random) - 1.5) : climb;
    if (busy) ++busy_windows;
    wander += -wander / kDriftWindows + c.drift * std::sqrt(2 / kDriftWindows) * step(random);
    shake += -shake / kJitterWindows + c.jitter * std::sqrt(2 / kJitterWindows) * step(random);
    const double speed =
        kSpeed * (1 - cost) * noise(random) * slow * start_up * trickle * std::exp(wander + shake);
    const double cpu_side = mode == RunMode::beside ? 1 - c.cpu_side_cost : 1;
    double busy_s = trickling     ? 0.05 * 0.05
                    : climbing    ? 0.05 * climb
                    : closed_loop ? 0.05 * c.in_flight_share * cpu_side
                                  : std::min(0.05, 0.02 * kSpeed / speed);
    double work = busy ? speed * busy_s : 0;
    if (c.queue && !closed_loop) {
      const bool bursting = t >= c.burst_from && t < c.burst_from + c.burst_windows;
      const double arriving = busy ? (bursting ? c.burst_load : c.load) * kSpeed * 0.05 : 0;
      const double served_at =
          speed * (mode == RunMode::gated && was_saturated ? c.gated_saturated_speed : 1);
      work = std::min(backlog + arriving, served_at * 0.05);
      backlog += arriving - work;
      busy_s = work / served_at;
      was_saturated = busy_s >= 0.9 * 0.05;
      if (busy && was_saturated) ++saturated;
    }
    DeviceObservation d{.now_ns = t * kWindowNs, .window_ns = kWindowNs};
    d.jobs.push_back({.job_id = 1,
                      .job_class = JobClass::production,
                      .launches = static_cast<uint64_t>(work),
                      .completed = static_cast<uint64_t>(work),
                      .in_flight_ns = busy ? static_cast<uint64_t>(busy_s * 1e9) : 0});
    d.jobs.push_back({.job_id = 2,
                      .job_class = JobClass::opportunistic,
                      .launches = starting ? 0 : static_cast<uint64_t>(100 * mode_gain),
                      .gate_waits = starting ? 0u : 10u,
                      .mps_client = c.on_mps});
    const std::vector<Gate> gates = made.policy->decide(d);
    EXPECT_EQ(gates.size(), 2u);
    EXPECT_FALSE(gates[0].paused || gates[0].production_idle_only);  // production never waits
    EXPECT_TRUE(gates[1].measure_production);
    EXPECT_EQ(gates[1].launches, kUnlimited);  // no rate law
    opportunistic_gate = gates[1];
    if (c.queue && made.policy->explain().ends_with(" held")) {  // (a queueing server only)
      EXPECT_TRUE(gates[1].paused) << "window " << t;
      ++held;
    }
    if (!busy) continue;  // production idle: nothing to lose, nothing measured here
    beside_run = mode == RunMode::beside ? beside_run + 1 : 0;
    longest_beside = std::max(longest_beside, beside_run);
    // Gated periods hold the in-flight bound (production meets a short queue there); beside
    // ones the queue bound, once the job's rate there is known: about 8 ms of its launches
    // beside a server or a job not yet read, 16 beside a loop (beside_queue_ms, at the busy
    // share the trace gives), 100 x gain per 50 ms window, at least the in-flight bound.
    if (in_phase > 3 && !trickling) {  // (a trickle's windows without a kernel read as idle)
      const auto [least_ms, most_ms] = traced_beside_ms(made.policy->explain());
      const double rate = 100 * c.beside_gain / 0.05;
      if (gates[1].production_idle_only) {
        EXPECT_EQ(gates[1].max_in_flight, 4u);
      } else if (!gates[1].paused && gates[1].max_in_flight != 0) {
        EXPECT_TRUE(gates[1].max_in_flight == queue_bound(rate, least_ms, 4) ||
                    gates[1].max_in_flight == queue_bound(rate, most_ms, 4))
            << gates[1].max_in_flight << " " << least_ms << " " << most_ms;
      }
    }
    if (t >= measured_from_s * 20) {
      relative_speed += (1 - cost) * (closed_loop ? cpu_side : 1);
      gain += mode_gain;
      paused += mode == RunMode::paused ? 1 : 0;
      beside += mode == RunMode::beside ? 1 : 0;
      ++windows;
    }
  }
  Outcome outcome{.production = relative_speed / windows,
                  .opportunistic = gain / windows,
                  .paused = paused / windows,
                  .beside = beside / windows,
                  .longest_beside = longest_beside,
                  .saturated = saturated,
                  .held = held};
  const std::string text = made.policy->explain();
  if (const size_t at = text.find(" relearnt="); at != std::string::npos)
    outcome.relearnt = std::stoi(text.substr(at + 10));
  std::printf(
      "costs %.2f/%.2f, gains %.2f/%.2f (%s): production %.3f, opportunistic %.3f, paused %.2f\n",
      c.gated_cost, c.beside_cost, c.gated_gain, c.beside_gain,
      c.closed_loop ? "closed loop" : "server", outcome.production, outcome.opportunistic,
      outcome.paused);
  return outcome;
}

// run_concurrency's production, opportunistic gain and shares, averaged over seeds 1..runs.
Outcome mean_over_seeds(Case c, int runs, int seconds, int measured_from_s) {
  Outcome mean;
  for (unsigned seed = 1; seed <= static_cast<unsigned>(runs); ++seed) {
    c.seed = seed;
    const Outcome o = run_concurrency(c, seconds, measured_from_s);
    mean.production += o.production / runs;
    mean.opportunistic += o.opportunistic / runs;
    mean.paused += o.paused / runs;
    mean.beside += o.beside / runs;
  }
  return mean;
}

// Fresh daemons (seeds 1 to `runs`) of `c`: their mean outcome, and how many held the
// opportunistic job back (gave it less than half of its gain beside).
struct Fleet {
  Outcome mean;
  int held = 0;
};
Fleet run_fleet(Case c, int runs, int seconds, int measured_from_s) {
  Fleet fleet;
  for (int run = 1; run <= runs; ++run) {
    c.seed = static_cast<unsigned>(run);
    const Outcome o = run_concurrency(c, seconds, measured_from_s);
    fleet.mean.production += o.production / runs;
    fleet.mean.opportunistic += o.opportunistic / runs;
    fleet.mean.beside += o.beside / runs;
    fleet.held += o.opportunistic < 0.5 * c.beside_gain ? 1 : 0;
  }
  return fleet;
}

// A launch-bound closed loop with CPU work between its kernels, which running beside costs 12 %
// of its steps on the CPU side (its speed in flight unchanged): read in flight the cost is nothing
// and beside runs nearly all the time; with throughput_cost the loss counts and production keeps
// about its target, the opportunistic job running beside part of the time and gated in the
// production job's gaps.
TEST(HarvestConcurrency, ACpuSideCostCountsWithThroughputCost) {
  Case c{0.02, 0.3, 0.0, 0.8};
  c.on_mps = true;
  c.in_flight_share = 0.65;
  c.cpu_side_cost = 0.12;
  const Outcome in_flight = run_concurrency(c);
  c.throughput_cost = true;
  const Outcome throughput = run_concurrency(c);
  EXPECT_LT(in_flight.production, 0.92);
  EXPECT_GE(throughput.production, 0.94);
  EXPECT_GT(throughput.opportunistic, 0.25);
}

// Gappy production that running beside does not slow: the opportunistic job runs beside it all
// but the reference share and the windows skipped after each change of mode.
TEST(HarvestConcurrency, HarmlessConcurrencyRunsBesideProductionAlmostAlways) {
  const Outcome outcome = run_concurrency({0.02, 0.3, 0.0, 0.8});
  EXPECT_GE(outcome.opportunistic, 0.85 * 0.8);
  EXPECT_GE(outcome.production, 0.97);
}

// A job whose start-up trickles for 3 s after the warm-up (warm_up_ms counts windows with
// progress, and the trickle's make it) and then trains, beside costing it 2 %: the pairs read in
// the trickle are dropped at its work's first paused periods (speed_jumped) and beside runs from
// there on. On the H200 (S5 gappy, call 99) 6 of 9 such daemons held the opportunistic job to
// 0.02-0.09 of its solo speed for the whole window. In this model over 10 seeds it got 0.756 of
// beside's 0.8 with the rule and 0.669 without (checked by taking it out: paused 0.05-0.33 of the
// busy time after the trickle, as the trickle's pairs made beside's cost a noise).
TEST(HarvestConcurrency, AStartUpThatTricklesPastTheWarmUpIsLearntAgain) {
  Case c{0.02, 0.3, 0.02, 0.8};
  c.on_mps = true;
  c.trickle_windows = 60;
  const Fleet fleet = run_fleet(c, 10, 20, 5);
  EXPECT_EQ(fleet.held, 0);
  EXPECT_GE(fleet.mean.opportunistic, 0.9 * 0.8);
  EXPECT_GE(fleet.mean.production, 0.95);
  for (unsigned seed : {1u, 2u, 3u}) {
    c.seed = seed;
    EXPECT_GE(run_concurrency(c, 20, 5).relearnt, 1) << seed;
  }
}

// A start-up that climbs past the warm-up (call 103's: 19 windows with progress against the
// warm-up's 15), a trickle of 14 windows and then a climb of 8 to the work's speed, beside costing
// it 2 %: the warm-up lasts until the climb is over (still_climbing), so fewer pairs of periods
// fall on it. Over 40 fresh daemons the opportunistic job got 0.633 of beside's 0.8 with the rule
// and 0.599 without (checked by setting kWarmUpLimit to 1), production 0.984 and 0.985 (trickles
// of 12 and 16 windows: 0.649 and 0.623 against 0.634 and 0.597); a shorter trickle (4-10
// windows), where the climb is nearly over as the warm-up ends, gave 0.660-0.678 with the rule
// and 0.672-0.678 without. The GPU's hold (a clear cost read on two pairs of the climb) does not
// recur in this model; with +-30 % noise a window, the noise's own misreadings swamp the climb's
// (held 2-8 of 40 with the rule, 1-6 without, no trend).
TEST(HarvestConcurrency, AStartUpThatClimbsPastTheWarmUpIsWaitedFor) {
  Case c{0.02, 0.3, 0.02, 0.8};
  c.on_mps = true;
  c.trickle_windows = 14;
  c.climb_windows = 8;
  const Fleet fleet = run_fleet(c, 40, 10, 0);
  EXPECT_EQ(fleet.held, 0);
  EXPECT_GE(fleet.mean.opportunistic, 0.62);
  EXPECT_GE(fleet.mean.production, 0.98);
}

// As on the H100 (2026-11-26, resnet50 b8 training beside an MPS client): production's speed
// wanders by about 20 % over seconds in every mode. Set against a paused reference averaged over
// the last 20 s, running beside read a cost of 15-20 % where it cost 4 %, and the opportunistic
// job was paused a quarter of production's busy time (0.48 of its solo speed, MPS client priority
// alone 0.73). Each period set against the one before it, the drift cancels.
TEST(HarvestConcurrency, ProductionsWanderingSpeedDoesNotReadAsACost) {
  Case c{0.02, 0.3, 0.0, 0.8};
  c.drift = 0.2;
  const Outcome outcome = run_concurrency(c, 120, 20);
  EXPECT_GE(outcome.opportunistic, 0.85 * 0.8);
  EXPECT_GE(outcome.production, 0.97);
}

// The same wander beside a job that running beside costs 20 %: still rationed to the target, and
// the opportunistic job still gets some of the time. The paused periods of one measured window
// (reference_period_ms) read the cost with a larger error here: production 0.982 and the
// opportunistic job 0.045 (0.977 and 0.058 with paused periods as long as the others).
TEST(HarvestConcurrency, ProductionsWanderingSpeedDoesNotHideACost) {
  Case c{0.25, 0.13, 0.2, 0.5};
  c.drift = 0.2;
  const Outcome outcome = run_concurrency(c, 120, 20);
  EXPECT_GE(outcome.production, 0.95 - 0.01);
  EXPECT_GT(outcome.opportunistic, 0.4 * 0.1);
}

// As on the H100: production's speed per window spreads +-30 % (sd 17 %) and the first window of
// each busy phase is much slower. Running beside costs nothing and the opportunistic job still
// runs beside it almost all the time: noise and phase starts do not make the costs unknown.
TEST(HarvestConcurrency, NoisyWindowsAndSlowPhaseStartsDoNotStopHarmlessConcurrency) {
  Case c{0.02, 0.3, 0.0, 0.8};
  c.spread = 0.3;
  c.slow_window = 20;
  const Outcome outcome = run_concurrency(c);
  EXPECT_GE(outcome.opportunistic, 0.8 * 0.8);
  EXPECT_GE(outcome.production, 0.97);
}

// The same noise beside a saturating job that every mode slows: still rationed to the target.
TEST(HarvestConcurrency, NoisyWindowsStillRationCostlyConcurrency) {
  Case c{0.25, 0.13, 0.2, 0.5};
  c.spread = 0.3;
  c.slow_window = 20;
  const Outcome outcome = run_concurrency(c);
  EXPECT_GE(outcome.production, 0.95 - 0.01);
}

// Production 2 s busy, 2 s idle, its first four windows of each busy phase at 0.3 of its speed in
// every mode (its ramp-up), running beside it costs 17 %: the ramp-up must not become the paused
// reference (beside would then read as free) and production stays at the target.
TEST(HarvestConcurrency, APhasesRampUpIsNotTheReference) {
  Case c{0.0, 0.02, 0.17, 0.5};
  c.spread = 0.15;
  c.phase_windows = 40;
  c.ramp_windows = 4;
  const Outcome outcome = run_concurrency(c, 120, 20);
  // 0.942 when the ramp-up was measured; 0.931 with a paused period of one measured window
  // (reference_period_ms) right after each return, where the ramp-up became the reference
  // (ConcurrencyBudget::resume_mode: 0.985, the opportunistic job 0.044 instead of 0.098).
  EXPECT_GE(outcome.production, 0.95);
}

// A server between requests: busy 100 ms, idle 200 ms (each gap long enough for the daemon to see
// production idle). A budget period goes on across such a short gap and is set against the one
// before it: when each gap ended the period (the first window of each busy phase is not measured,
// so a period never filled) the mode never changed and the opportunistic job got 0.15.
TEST(HarvestConcurrency, ShortGapsDoNotStopTheMeasuring) {
  Case c{0.02, 0.3, 0.0, 0.8};
  c.phase_windows = 2;
  c.gap_windows = 4;
  const Outcome outcome = run_concurrency(c, 120, 20);
  EXPECT_GE(outcome.opportunistic, 0.6 * 0.8);  // 0.52; 0.15 when each gap ended the period
  EXPECT_GE(outcome.production, 0.97);
}

// S5 on the H100: production 1 s busy, 1 s idle, noisy, its first two windows of each busy phase
// slow in every mode; running beside it (MPS, client priority) costs it little. The opportunistic
// job must run beside it most of each busy phase, not sit paused.
// S5 as on the H100: production 1 s busy, 1 s idle, its speed per window spreading +-30 %, the
// first two windows of each busy phase slow in every mode; running beside it costs 2 %.
Case s5_gappy(double gated_gain) {
  Case c{0.02, gated_gain, 0.02, 0.8};
  c.spread = 0.3;
  c.phase_windows = 20;
  c.ramp_windows = 2;
  return c;
}

// S5's costly pairs at 1 s phases: a saturating job (both modes cost it) and a transformer server
// (beside costs it 36 %), +-10 % per window.
Case s5_costly(double gated_cost, double gated_gain, double beside_cost, double beside_gain) {
  Case c{gated_cost, gated_gain, beside_cost, beside_gain};
  c.spread = 0.1;
  c.phase_windows = 20;
  c.ramp_windows = 2;
  return c;
}

TEST(HarvestConcurrency, ShortBusyPhasesStillRunHarmlessConcurrency) {
  Case c = s5_gappy(0.3);
  const Outcome outcome = run_concurrency(c, 120, 20);
  EXPECT_GE(outcome.opportunistic, 0.7 * 0.8);
  EXPECT_GE(outcome.production, 0.95);
  c.on_mps = true;  // the installed default's form: the budget because the job is an MPS client
  const Outcome on_mps = run_concurrency(c, 120, 20);
  EXPECT_GE(on_mps.opportunistic, 0.7 * 0.8);
  EXPECT_GE(on_mps.production, 0.95);
}

// S5 on the H100 as the benchmark runs it: the opportunistic job registers and then idles while
// it starts up (builds its model, warms up) as production already runs. Those windows show no
// gain in any mode because it did not try to run, not because the mode gives it nothing. Read as
// gains, they made running beside production look worthless; gating (which gives it little
// beside a job that keeps kernels in flight) then took all of production's busy time, beside got
// none and so was never measured again: the opportunistic job got 0.02-0.04 of its solo speed
// while production was busy, on gpushared's MPS, in both benchmark calls. Measured here over the
// next 18 s (the benchmark's three 6 s windows).
TEST(HarvestConcurrency, AnOpportunisticJobIdleByItsOwnChoiceIsNotMeasured) {
  Case c = s5_gappy(0.05);
  c.on_mps = true;
  c.idle_windows = 60;  // 3 s
  const Outcome outcome = run_concurrency(c, 21, 3);
  // 0.05 (gated throughout) when they were read. 0.53 since production's warm-up is not measured
  // (0.58 before): the first costs then rest on later windows, and three of them read beside at
  // 0.20 +- 0.03 (its true cost 0.02), which held it to its exploring share for 2 s of the 18.
  // 0.49 since a cost given the doubt on fewer than doubt_samples pairs raises the reference share.
  EXPECT_GE(outcome.opportunistic, 0.55 * 0.8);
  EXPECT_GE(outcome.production, 0.95);
  c.on_mps = false;  // the same with the budget chosen directly
  const Outcome direct = run_concurrency(c, 21, 3);
  EXPECT_GE(direct.opportunistic, 0.55 * 0.8);
  EXPECT_GE(direct.production, 0.95);
}

// A launch-bound production job that running beside costs 4 % (within the target, but not
// distinguishable from nothing at first): no throttling beyond the reference share.
TEST(HarvestConcurrency, ACostWithinTheTargetIsNotThrottled) {
  const Outcome outcome = run_concurrency({0.3, 0.1, 0.04, 0.85});
  EXPECT_GE(outcome.opportunistic, 0.8 * 0.85);
  EXPECT_GE(outcome.production, 0.95 - 0.005);  // the target spent, not more
}

// Saturating production that every mode slows: the opportunistic job gets what keeps production
// at the target.
TEST(HarvestConcurrency, CostlyConcurrencyIsRationedToKeepProductionAtTarget) {
  const Outcome outcome = run_concurrency({0.25, 0.13, 0.2, 0.5});
  EXPECT_GE(outcome.production, 0.95 - 0.005);
  EXPECT_GT(outcome.opportunistic, 0.5 * 0.1);
}

// A fresh daemon learns the costs, which costs production more than the target allows; the debt
// of that loss is repaid within seconds (the benchmark's windows are 6 s). Measured after
// production's warm-up (0.75 s of busy time, not measured).
TEST(HarvestConcurrency, WhatLearningCostsIsRepaid) {
  const Outcome outcome = run_concurrency({0.25, 0.13, 0.2, 0.5}, 7, 1);
  EXPECT_GE(outcome.production, 0.95 - 0.01);
}

// A production job's warm-up is not measured: on the H200 its first second of busy time ran at a
// third of its later speed and less, and the few pairs of periods a short run gives read a 25 %
// cost of running beside it as 12 % +- 12 %, which passed as noise (beside then ran 90 % of
// production's busy time and production kept 0.82, S5 saturating on one MPS server); on the H100
// a resnet50 b8 job's start-up took 12 windows with progress (0.6 s). During the warm-up the
// opportunistic job waits and the budget records nothing; after it, production's windows are
// measured. Costly concurrency in 1 s phases, as in S5, production's speed climbing from 0.1 over
// its first 0.5 s, over the benchmark's 18 s, ten runs: production 0.965 (0.956 while gated was
// learnt beside a job in flight all the time). In this model the start-up measured (warm_up_ms 0)
// gives the same on average (0.965; 0.951 to 0.956 before): the margin was one run's, not the
// warm-up's, so the warm-up is asserted directly.
TEST(HarvestConcurrency, AProductionJobsWarmUpIsNotMeasured) {
  double production = 0;
  constexpr int kRuns = 10;
  for (unsigned seed = 1; seed <= kRuns; ++seed) {
    Case c{0.02, 0.05, 0.25, 0.5};
    c.spread = 0.1;
    c.phase_windows = 20;
    c.start_up_windows = 10;
    c.on_mps = true;
    c.seed = seed;
    production += run_concurrency(c, 24, 6).production / kRuns;
  }
  EXPECT_GE(production, 0.95);

  auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}});
  ASSERT_TRUE(made.policy);
  const std::string fresh = made.policy->explain();
  for (int t = 0; t < 40; ++t) {
    DeviceObservation d{.now_ns = t * 50'000'000ull, .window_ns = 50'000'000};
    d.jobs.push_back({.job_id = 1,
                      .job_class = JobClass::production,
                      .launches = 100u + 50u * static_cast<uint64_t>(t),  // starting up
                      .completed = 100u + 50u * static_cast<uint64_t>(t),
                      .in_flight_ns = 50'000'000u});
    d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 100});
    const std::vector<Gate> gates = made.policy->decide(d);
    // 750 ms: fifteen windows with progress, the opportunistic job paused, nothing recorded.
    if (t < 15) {
      EXPECT_TRUE(gates[1].paused) << "window " << t;
      EXPECT_EQ(made.policy->explain(), fresh) << "window " << t;
    }
  }
  EXPECT_NE(made.policy->explain().find("busy=1.00"), std::string::npos) << made.policy->explain();
}

// The warm-up is counted in whole windows too: 800 ms is sixteen windows whether the daemon's
// run 20 us short or long (counted in nanoseconds, sixteen short ones fell short of it, and the
// opportunistic job waited for the next paused period's end, two windows later).
TEST(HarvestConcurrency, AWarmUpLastsItsLengthInWholeWindows) {
  auto first_unpaused = [](uint64_t window_ns) {
    auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}, {"warm_up_ms", 800}});
    EXPECT_TRUE(made.policy) << made.error;
    for (int t = 0; t < 40; ++t) {
      DeviceObservation d{.now_ns = t * window_ns, .window_ns = window_ns};
      d.jobs.push_back({.job_id = 1,
                        .job_class = JobClass::production,
                        .launches = 1000,
                        .completed = 1000,
                        .in_flight_ns = window_ns});
      d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 100});
      if (!made.policy->decide(d)[1].paused) return t;
    }
    return -1;
  };
  const int exact = first_unpaused(50'000'000);
  // The job's first window (no progress known yet), 16 of warm-up (the last, not measured, begins
  // the first paused period), then that period's measured window: the warm-up's windows do not
  // count toward it, so that it ends on a window it measures.
  ASSERT_EQ(exact, 17);
  EXPECT_EQ(first_unpaused(50'000'000 - 20'000), exact);
  EXPECT_EQ(first_unpaused(50'000'000 + 20'000), exact);
}

// The warm-up beyond warm_up_ms: a job whose work starts as its warm-up ends (100 kernels a
// window, then 1,000) holds the opportunistic job until its last three windows no longer stand
// e^0.5 above the three before; one that keeps climbing (1.2 times a window, e^0.55 over three)
// holds it until twice warm_up_ms, no longer; a steady job not at all beyond warm_up_ms.
TEST(HarvestConcurrency, AClimbingStartUpHoldsTheWarmUpUpToTwiceItsLength) {
  auto first_unpaused = [](auto work_at) {
    auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}});
    EXPECT_TRUE(made.policy) << made.error;
    for (int t = 0; t < 80; ++t) {
      DeviceObservation d{.now_ns = t * 50'000'000ull, .window_ns = 50'000'000};
      const auto work = static_cast<uint64_t>(work_at(t));
      d.jobs.push_back({.job_id = 1,
                        .job_class = JobClass::production,
                        .launches = work,
                        .completed = work,
                        .in_flight_ns = 50'000'000u});
      d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 100});
      if (!made.policy->decide(d)[1].paused) return t;
    }
    return -1;
  };
  const int steady = first_unpaused([](int) { return 1000.0; });
  ASSERT_GT(steady, 15);
  // Its last slow window is the warm-up's 13th with progress (the first window has none): the
  // climb is over once two of the three windows before the last three are fast too, three windows
  // after the warm-up's 15th.
  const int late_work = first_unpaused([](int t) { return t < 14 ? 100.0 : 1000.0; });
  EXPECT_EQ(late_work, steady + 3);
  const int climbing = first_unpaused([](int t) { return 10 * std::pow(1.2, t); });
  EXPECT_EQ(climbing, steady + 15);  // warm_up_ms's 15 windows more, then no longer
}

// Production idle for one window while the budget holds the opportunistic job paused (here its
// warm-up): the job is released at once, idle-gated with the in-flight bound, and held again when
// production is back. Waiting for idle_windows (3) left the GPU idle for 150-200 ms of each idle
// phase on the H100 (S5 beside a transformer server: take back 200 ms). idle_release=0 waits.
TEST(HarvestConcurrency, AnIdleWindowReleasesThePausedJobAtOnce) {
  for (const bool release : {true, false}) {
    auto made = make_policy(
        "harvest", {{"concurrency", 1}, {"in_flight", 4}, {"idle_release", release ? 1.0 : 0.0}});
    ASSERT_TRUE(made.policy);
    uint64_t t = 0;
    auto window = [&](bool production_busy) {
      DeviceObservation d{.now_ns = t++ * 50'000'000ull, .window_ns = 50'000'000};
      const uint64_t work = production_busy ? 1000 : 0;
      d.jobs.push_back({.job_id = 1,
                        .job_class = JobClass::production,
                        .launches = work,
                        .in_flight = production_busy ? std::optional<uint32_t>(8) : 0u,
                        .completed = work,
                        .in_flight_ns = production_busy ? 50'000'000u : 0u});
      d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = 0});
      return made.policy->decide(d)[1];
    };
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(window(true).paused);  // production's warm-up
    const Gate idle = window(false);
    EXPECT_EQ(idle.paused, !release);
    EXPECT_EQ(idle.production_idle_only, release);
    EXPECT_EQ(idle.max_in_flight, release ? 4u : 0u);
    EXPECT_TRUE(window(true).paused) << "held again once production is back";
    // Without the release the job runs only once idle_windows declare production idle.
    Gate third;
    for (int i = 0; i < 3; ++i) third = window(false);
    EXPECT_FALSE(third.paused);
    EXPECT_TRUE(third.production_idle_only);
  }
}

// A server's throughput is its load: the cost shows as busy time per request (latency), and the
// budget reads it there.
TEST(HarvestConcurrency, AServersCostIsReadInItsBusyTime) {
  const Outcome costly = run_concurrency({0.25, 0.13, 0.3, 0.9, false});
  EXPECT_GE(costly.production, 0.95 - 0.005);
  const Outcome mixed = run_concurrency({0.02, 0.4, 0.3, 0.9, false});
  EXPECT_GE(mixed.production, 0.95 - 0.005);
  EXPECT_GE(mixed.opportunistic, 0.8 * 0.4 * 0.95);  // at least most of gating's whole harvest
}

// A server at 40 % load (in flight 0.4 of each window) that running beside slows by 30 % (its
// requests' time stretched 2.0 times) and gating by 2 %: with tail_factor (1.2) beside runs only
// to be measured, the server loses what gating costs it and gating takes the harvest (production
// 0.979, the opportunistic job 0.383); without it beside gets what the allowance leaves (0.961,
// 0.408).
TEST(HarvestConcurrency, AServersTailKeepsCostlyModesToTheirMeasurement) {
  Case c{0.02, 0.4, 0.3, 0.9, false};
  const Outcome bounded = run_concurrency(c);
  c.tail_factor = 0;
  const Outcome unbounded = run_concurrency(c);
  EXPECT_GE(bounded.production, 1 - 0.02 - 0.005);  // gating's 2 %, nearly all the time
  EXPECT_LT(unbounded.production, bounded.production - 0.01);
  EXPECT_GE(bounded.opportunistic, 0.8 * 0.4 * 0.95);
}

// A server (in flight 40 % of the time solo) that running beside slows by 40 % meets beside one
// window at a time, from its first learning period on (brief_exposure: its queue grows for as
// long as beside runs); the same server beside a free mode, and a training loop beside the same
// cost, run beside in periods of several windows.
TEST(HarvestConcurrency, AServerMeetsACostlyModeOneWindowAtATime) {
  Case server{0.0, 0.3, 0.4, 0.8};
  server.closed_loop = false;
  EXPECT_EQ(run_concurrency(server, 30, 0).longest_beside, 1);
  Case free_server = server;
  free_server.beside_cost = 0.0;
  EXPECT_GE(run_concurrency(free_server, 30, 0).longest_beside, 3);
  Case loop = server;
  loop.closed_loop = true;
  EXPECT_GE(run_concurrency(loop, 30, 0).longest_beside, 3);
}

// A server whose queue builds (a burst of requests at 1.2 times its speed for half a second) is
// not gated into while it leaves no gaps: each short gap would let the opportunistic job's
// kernels in, at half the server's speed, and its queue would drain only in the paused periods
// (harvest's saturated_hold; on the H100, S2 call 87, one gated period ran 28 windows with the
// server in flight 93-97 % of each and its p99 at 562 ms against 15). Held, the burst's queue
// drains in about as many windows as it took to build (13 windows saturated; 60 without the
// hold, where the budget then read gated as costly and paused half the busy time), and the
// harvest is what it is without the burst (0.273 against 0.278; 0.156 without the hold). The
// trace names each held window (" held").
TEST(HarvestConcurrency, ASaturatedServerIsNotGatedInto) {
  Case server{0.02, 0.3, 0.4, 0.8};
  server.closed_loop = false;
  server.queue = true;
  server.gated_saturated_speed = 0.5;
  const Outcome calm = run_concurrency(server, 40, 0);
  server.burst_load = 1.2;
  server.burst_from = 400;
  server.burst_windows = 10;
  const Outcome burst = run_concurrency(server, 40, 0);
  EXPECT_EQ(calm.saturated, 0);
  EXPECT_EQ(calm.held, 0);
  EXPECT_LE(burst.saturated, 2 * server.burst_windows + 5);
  EXPECT_GT(burst.held, 0);  // the trace names the held windows (their gates say paused)
  EXPECT_GE(burst.opportunistic, calm.opportunistic - 0.02);
}

// A launch-bound closed loop (in flight 0.65 of each window, CPU work between its kernels) that
// running beside slows by 20 %: it leaves gaps, but it loses the work itself and has no queue,
// so the tail bound leaves its schedule as it was (ModeMeasures::queues). (Not exactly: with
// tail_factor its costly beside runs one window at a time, brief_exposure, which does not ask:
// over 40 seeds production kept 0.954 instead of 0.953, the opportunistic job 0.370 instead of
// 0.375. Without the queues condition the opportunistic job got 0.289 instead of 0.396.)
TEST(HarvestConcurrency, AClosedLoopWithGapsIsNotAServer) {
  Case c{0.02, 0.3, 0.2, 0.9};
  c.in_flight_share = 0.65;
  const Outcome bounded = run_concurrency(c);
  c.tail_factor = 0;
  const Outcome unbounded = run_concurrency(c);
  EXPECT_NEAR(bounded.production, unbounded.production, 0.01);
  EXPECT_NEAR(bounded.opportunistic, unbounded.opportunistic, 0.03);
}

// A Poisson server that running beside slows by 3 % (its requests stretched 1.05 times), its
// pairs of periods spreading about as on the H100 (a jitter of 0.25), over 40 fresh daemons:
// the ones whose first pairs read beside as stretching its requests recheck that reading and
// most then run beside (the opportunistic job 0.634 of its solo speed, 4 of 40 daemons under
// half its gain beside; without the recheck 0.475 and 19, each such reading kept for the whole
// run; with the recheck's time taken from paused's only, 0.599 and 8). A server
// that beside slows by 35 % meets it no more for that (0.007 of its busy time; 0.005 without).
TEST(HarvestConcurrency, AServersMisreadIsRecheckedNotKept) {
  Case c{0.02, 0.3, 0.03, 0.8, false};
  c.on_mps = true;
  c.jitter = 0.25;
  const Fleet cheap = run_fleet(c, 40, 20, 3);
  EXPECT_GE(cheap.mean.opportunistic, 0.6);
  EXPECT_LE(cheap.held, 10);  // 19 without
  EXPECT_GE(cheap.mean.production, 0.97);
  c.beside_cost = 0.35;
  const Fleet costly = run_fleet(c, 40, 20, 3);
  EXPECT_LE(costly.mean.beside, 0.01);
  EXPECT_EQ(costly.held, 40);
}

// A server whose queue is full from its start runs as a loop (in flight all of each window) for
// its first 20 s, where running beside slows it by 2 %; then its requests come at 0.6 of its
// speed and beside slows it by 15 %, which stretches its requests 1.6 times (sojourn_factor).
// The windows beside it show the gaps that its paused ones, 16 of them kept, all read as a
// loop's, will not show for seconds: the budget learns again (loop_left) and takes it for the
// server it is. Over the 20 s after the change beside ran 0.035 of its busy time (learning one
// window at a time, then held by the tail bound) and production kept 0.980, as beside a server
// never seen as a loop (0.005, 0.980). Without it beside ran 0.95 of the time for the first 5 s
// after the change, until enough new pairs outweighed the loop's in the cost: 0.240, 0.951.
TEST(HarvestConcurrency, ALoopThatBecomesAServerIsLearntAgain) {
  Case c{0.02, 0.3, 0.15, 0.8, false};
  c.on_mps = true;
  c.queue = true;
  c.load = 0.6;
  c.loop_windows = 400;
  c.loop_beside_cost = 0.02;
  const Outcome changed = run_concurrency(c, 40, 20);
  c.loop_windows = 0;
  const Outcome server = run_concurrency(c, 40, 20);
  std::printf("beside %.3f (a server from its start %.3f), saturated %d (%d), relearnt %d\n",
              changed.beside, server.beside, changed.saturated, server.saturated, changed.relearnt);
  EXPECT_EQ(changed.relearnt, 1);
  EXPECT_EQ(server.relearnt, 0);
  EXPECT_LE(changed.beside, server.beside + 0.05);
  EXPECT_GE(changed.production, server.production - 0.01);
}

// Not a loop that left: a loop with short busy phases (5 windows on, 5 off), whose windows
// beside it include the partial ones where it stops, keeps what it learnt, as does a loop of
// 1 s phases; each harvests as before (AFreshWindowLearnsBesideFirst's kind of pair).
TEST(HarvestConcurrency, ALoopsShortPhasesAreNotTakenForAChange) {
  for (int phase : {5, 20}) {
    Case c{0.02, 0.3, 0.02, 0.8};
    c.on_mps = true;
    c.phase_windows = phase;
    c.jitter = 0.15;
    const Outcome o = run_concurrency(c, 30, 10);
    std::printf("phases of %d windows: relearnt %d, beside %.3f\n", phase, o.relearnt, o.beside);
    EXPECT_EQ(o.relearnt, 0);
  }
}

// The trace names what the budget's decision rested on: each mode's cost, gain and share.
TEST(HarvestConcurrency, ExplainsItsShares) {
  auto law = make_policy("harvest", {});
  ASSERT_TRUE(law.policy);
  EXPECT_EQ(law.policy->explain(), "");  // the rate law: its gates say it all
  auto made = make_policy("harvest", {{"concurrency", 1}});
  ASSERT_TRUE(made.policy);
  // Learning: paused and beside in turn, a paused period two thirds as long (reference_period_ms).
  EXPECT_EQ(made.policy->explain(), "budget gated=?/?:0.00 beside=?/?:0.60 busy=?");
}

// S5 as the benchmark runs it with fresh daemons: production warmed up (1 s busy) before a 6 s
// window of 1 s on / 1 s off, so the window holds 3 s of busy production and the budget learns
// in it. Two hundred runs of each, with paused periods of 100 ms (reference_period_ms) and, set
// against them, as long as the others (150 ms while learning, 200 ms after: until 2026-11-27).
// - Beside a gappy job that running beside costs 2 %, the opportunistic job gets most of what it
//   gets beside it: 0.36 of it when the budget learnt every mode at equal shares after a warm-up
//   of 1.5 s, 0.74 learning beside first after a warm-up of 0.75 s (ten runs; 0.67 over forty;
//   0.79 with the opportunistic job beside production during the warm-up, which on the H100 cost
//   a production job that running beside slows by 41 % too much: harvest.cpp). With the short
//   paused periods 0.554 and 0.563 (0.693 and 0.704 of beside's gain) with +-30 % noise per
//   window and with +-10 % and a jitter of 0.15 (the H100's kind of noise: Case::jitter), against
//   0.547 and 0.540 with paused periods as long as the others, and 0.543 and 0.521 with the
//   budget before 2026-11-27 (its periods counted, not weighted by length). Since the warm-up's
//   windows no longer count toward the first paused period after it (which then ends on a window
//   it measures, so that brief_exposure knows production's busy share), 0.565 and 0.575 against
//   0.569 and 0.561: the short paused periods gain with the H100's kind of noise (jitter), not
//   with +-30 % per window, where the check allows them 0.01.
// - Beside a saturating job (25 %) and an inference loop that running beside slows by 36 %
//   (transformer_infer_b8 on the H100), the learning costs production more than the target allows
//   in so short a window. With gated learnt beside a job in flight all the time (until 2026-11-26,
//   ten runs) production kept 0.908 beside the saturating job; without, 0.931 and 0.933; with the
//   learning's debt repaid over 5 periods instead of 15, exploring held back while it is repaid,
//   and a cost of 25 % or more on each of two pairs known at once (concurrency_budget.h), 0.937
//   and 0.945; with learning periods of 150 ms, 0.948 and 0.966 (forty runs); with the short
//   paused periods 0.948 and 0.963 (0.943 and 0.962 with them as long as the others). In the
//   saturating case the first window of each busy phase costs 25 % whatever the budget does (the
//   opportunistic job, idle-gated, meets production's return).
TEST(HarvestConcurrency, AFreshBudgetHarvestsInTheBenchmarksWindow) {
  struct Pair {
    Case c;
    double production, opportunistic;  // at least, on average
    double harvest_gained;             // over paused periods as long as the others, at least
  };
  const Case saturating = s5_costly(0.25, 0.13, 0.25, 0.5);
  const Case inference = s5_costly(0.02, 0.0, 0.36, 0.75);
  Case jittery = s5_gappy(0.3);
  jittery.spread = 0.1;
  jittery.jitter = 0.15;
  for (Pair pair :
       {Pair{s5_gappy(0.3), 0.97, 0.65 * 0.8, -0.01}, Pair{jittery, 0.97, 0.65 * 0.8, 0.01},
        Pair{saturating, 0.945, 0, -0.01}, Pair{inference, 0.96, 0, -0.01}}) {
    std::array<double, 2> production{}, opportunistic{};
    for (size_t reference = 0; reference < 2; ++reference) {
      constexpr int kRuns = 200;
      for (unsigned seed = 1; seed <= kRuns; ++seed) {
        Case c = pair.c;
        c.start_up_windows = 10;
        c.on_mps = true;
        c.seed = seed;
        if (reference == 1) c.reference_period_ms = c.learning_period_ms;
        const Outcome o = run_concurrency(c, 8, 2);
        production[reference] += o.production / kRuns;
        opportunistic[reference] += o.opportunistic / kRuns;
      }
    }
    std::printf(
        "fresh window, beside cost %.2f, jitter %.2f: production %.3f (%.3f with paused "
        "periods as long as the others), opportunistic %.3f (%.3f)\n",
        pair.c.beside_cost, pair.c.jitter, production[0], production[1], opportunistic[0],
        opportunistic[1]);
    EXPECT_GE(production[0], pair.production) << pair.c.beside_cost;
    EXPECT_GE(production[0], production[1] - 0.005) << pair.c.beside_cost;
    EXPECT_GE(opportunistic[0], pair.opportunistic) << pair.c.beside_cost;
    EXPECT_GE(opportunistic[0] - opportunistic[1], pair.harvest_gained) << pair.c.beside_cost;
  }
}

// A fresh job's first busy phase of 4 s, as S5 at 4 s on and off gives it on the H100 after the
// harness's warm-up: 200 runs of 4 s, measured from 1 s, each window's speed within +-3 % (the
// H100's first readings beside gappy resnet50 b8 were 0.015 +- 0.020 and 0.022 +- 0.006 on 3
// pairs, 2026-12-06). Beside a job that running beside costs 2 % the reading is clear on 4
// pairs in most runs: the doubt's share ends there, and the reference share's periods wait while
// the learning's keep it. The opportunistic job gets 0.744 of its solo speed, against 0.720 with
// clear_margin 0 (the doubt's share until 8 pairs, then the reference's rotation on top of the
// learning's pauses), production 0.981 against 0.982. Beside a saturating job (25 %) and the
// transformer server (36 %) no reading is clear, and nothing changes. Over 60 s of a job that
// running beside costs 2 % the paused share is the reference share either way.
TEST(HarvestConcurrency, AClearReadingKeepsTheLearningsPausesAsTheReference) {
  auto fresh = [](Case c, double clear_margin) {
    c.spread = 0.03;
    c.phase_windows = 80;
    c.start_up_windows = 10;
    c.on_mps = true;
    c.clear_margin = clear_margin;
    const Outcome mean = mean_over_seeds(c, 200, 4, 1);
    std::printf(
        "fresh 4 s, beside cost %.2f, clear_margin %.0f: production %.3f, opportunistic %.3f\n",
        c.beside_cost, clear_margin, mean.production, mean.opportunistic);
    return mean;
  };
  const Outcome gappy = fresh(s5_gappy(0.3), 2), gappy_off = fresh(s5_gappy(0.3), 0);
  EXPECT_GE(gappy.opportunistic, gappy_off.opportunistic + 0.015);
  EXPECT_GE(gappy.production, 0.975);
  EXPECT_GE(gappy.production, gappy_off.production - 0.003);
  for (const Case& costly : {s5_costly(0.25, 0.13, 0.25, 0.5), s5_costly(0.02, 0.0, 0.36, 0.75)}) {
    const Outcome on = fresh(costly, 2), off = fresh(costly, 0);
    EXPECT_NEAR(on.production, off.production, 0.002) << costly.beside_cost;
    EXPECT_NEAR(on.opportunistic, off.opportunistic, 0.002) << costly.beside_cost;
  }
  std::array<double, 2> paused{};
  for (int clear = 0; clear < 2; ++clear) {
    Case c{0.02, 0.3, 0.02, 0.8};
    c.spread = 0.05;
    c.on_mps = true;
    c.clear_margin = 2.0 * clear;
    for (unsigned seed = 1; seed <= 20; ++seed) {
      c.seed = seed;
      paused[clear] += run_concurrency(c, 60, 20).paused / 20;
    }
  }
  EXPECT_NEAR(paused[1], paused[0], 0.003);
  EXPECT_NEAR(paused[1], 0.05, 0.005);
}

// Robust costs in a fresh benchmark window (as AFreshBudgetHarvestsInTheBenchmarksWindow) where
// 3 % of production's windows stall, in every mode alike (as on the H100): beside a gappy job that
// running beside does not slow, the runs whose early stalls fell in beside periods held the
// opportunistic job for the rest of the window, and robust costs harvest more; beside jobs that
// running beside slows by 25 % and 36 % production keeps what it kept without them, within a
// hundredth.
TEST(HarvestConcurrency, RobustCostsHarvestMoreWhereStallsFallInBesidePeriods) {
  Case gappy = s5_gappy(0.3);
  gappy.spread = 0.1;
  const Case saturating = s5_costly(0.25, 0.13, 0.25, 0.5);
  const Case inference = s5_costly(0.02, 0.0, 0.36, 0.75);
  auto run = [](Case c, bool robust) {
    c.start_up_windows = 10;
    c.on_mps = true;
    c.dip_rate = 0.03;
    c.robust_costs = robust;
    const Fleet fleet = run_fleet(c, 200, 12, 2);
    std::printf(
        "stalls, beside cost %.2f, robust %d: production %.3f, opportunistic %.3f, held %d\n",
        c.beside_cost, robust, fleet.mean.production, fleet.mean.opportunistic, fleet.held);
    return fleet;
  };
  const Fleet gappy_mean = run(gappy, false), gappy_robust = run(gappy, true);
  EXPECT_GT(gappy_robust.mean.opportunistic, gappy_mean.mean.opportunistic + 0.02);
  EXPECT_LT(gappy_robust.held, gappy_mean.held);
  EXPECT_GE(gappy_robust.mean.production, 0.97);
  for (const Case& costly : {saturating, inference}) {
    const Fleet mean = run(costly, false), robust = run(costly, true);
    EXPECT_GE(robust.mean.production, mean.mean.production - 0.01) << costly.beside_cost;
  }
}

TEST(HarvestConcurrency, NeedsTheGateFromTheSystem) {
  EXPECT_FALSE(make_policy("harvest", {{"concurrency", 1}}, {.kernel_idle_gating = false}).policy);
  EXPECT_NE(make_policy("harvest", {{"reference_share", 0.9}}).error.find("out of range"),
            std::string::npos);
}

// Window `t` of 50 ms for the queue bound's tests: production (job 1) busy all of it, 1,000
// kernels, or idle; the opportunistic job (job 2) launching `launches`.
DeviceObservation queue_window(uint64_t t, bool production_busy, uint64_t launches) {
  DeviceObservation d{.now_ns = t * 50'000'000ull, .window_ns = 50'000'000};
  d.jobs.push_back({.job_id = 1,
                    .job_class = JobClass::production,
                    .launches = production_busy ? 1000u : 0u,
                    .completed = production_busy ? 1000u : 0u,
                    .in_flight_ns = production_busy ? 50'000'000u : 0u});
  d.jobs.push_back({.job_id = 2, .job_class = JobClass::opportunistic, .launches = launches});
  return d;
}

// Production idle: the opportunistic job runs unpaused, whatever the mode of the last busy
// period, idle-gated (production's first launch holds it at once) unless that period runs beside
// at a cost within the target (AReturnIntoBesideIsHeldOnlyWhereBesideFitsTheTarget; here beside
// costs nothing), and with a short queue of its own work, so that production, back, waits
// little for what it had queued: 1/32 of
// production's busy phase, within queue_ms (2) and idle_queue_ms (40). At 1,000 launches per
// 50 ms window, 1 s phases allow 31.25 ms (625 kernels); 0.1 s phases the least, 2 ms (40): all
// six end within production's warm-up (warm_up_ms), so no phase is known.
// Beside busy production the bound is queue_ms's (and loop_queue_ms's, the same here: production
// keeps the GPU busy): 500 launches per window make 20.
TEST(HarvestConcurrency, IdleProductionLeavesTheOpportunisticJobAShortQueue) {
  struct Case {
    double idle_queue_ms;
    int busy_windows;
    uint32_t idle_bound;
  };
  for (const Case c : {Case{40, 20, 625}, Case{40, 2, 40}, Case{0, 20, 0}}) {
    auto made = make_policy("harvest", {{"concurrency", 1},
                                        {"in_flight", 4},
                                        {"idle_queue_ms", c.idle_queue_ms},
                                        {"queue_ms", 2},
                                        {"loop_queue_ms", 2}});
    ASSERT_TRUE(made.policy);
    // Six phases of 2 windows end within the warm-up: no phase is known.
    const std::optional<double> phase_s =
        c.busy_windows >= 20 ? std::optional(c.busy_windows * 0.05) : std::nullopt;
    EXPECT_EQ(queue_bound(20'000, idle_queue_ms(phase_s, 2, c.idle_queue_ms), 4),
              c.idle_bound == 0 ? 4 : c.idle_bound);
    std::set<std::pair<bool, bool>> busy_modes;  // (paused, idle-gated) while production was busy
    uint64_t t = 0;
    Gate last{.paused = true};
    auto window = [&](bool production_busy) {
      // Beside a busy production job the opportunistic job launches most when it runs beside it.
      const uint64_t launches = !production_busy            ? 1000
                                : last.paused               ? 0
                                : last.production_idle_only ? 10
                                                            : 500;
      return last = made.policy->decide(queue_window(t++, production_busy, launches))[1];
    };
    const std::string where = "idle_queue_ms " + std::to_string(c.idle_queue_ms) + ", " +
                              std::to_string(c.busy_windows) + " busy windows, ";
    int idle_phases_released = 0, idle_phases_held = 0;
    for (int phase = 0; phase < 6; ++phase) {
      for (int i = 0; i < c.busy_windows; ++i) {
        const Gate busy = window(true);
        busy_modes.insert({busy.paused, busy.production_idle_only});
        // (From the fourth window: the first ones after production's return are mixed.)
        if (i > 3 && !busy.paused && !busy.production_idle_only && busy.max_in_flight != 0) {
          EXPECT_EQ(busy.max_in_flight, 20u) << where << "phase " << phase << ", window " << i;
        }
      }
      bool beside = false;  // the period in progress when production went idle runs beside
      for (int i = 0; i < 10; ++i) {
        const Gate idle = window(false);
        // idle_windows: production counts as idle from the third; before it, the busy period's
        // gate (beside: neither paused nor idle-gated).
        if (i == 2) beside = !idle.paused && !idle.production_idle_only;
        if (i == 3) ++(idle.production_idle_only ? idle_phases_held : idle_phases_released);
        if (i < 3) continue;
        // The rate is known from the third window of the first idle phase on.
        if (phase == 0 && i < 5)
          EXPECT_EQ(idle.max_in_flight, 0u) << where << "window " << i;
        else
          EXPECT_EQ(idle.max_in_flight, c.idle_bound) << where << "phase " << phase << ", " << i;
        EXPECT_EQ(idle.launches, kUnlimited);
        EXPECT_FALSE(idle.paused);
        if (!beside) {
          EXPECT_TRUE(idle.production_idle_only) << where << "phase " << phase << ", " << i;
        }
      }
    }
    // A beside period preceded some idle phases, and production's return held the job in others
    // (while beside's cost is learnt).
    if (c.busy_windows >= 20) {
      EXPECT_TRUE(busy_modes.count({false, false})) << where;
      EXPECT_GT(idle_phases_released, 0) << where;
    }
    EXPECT_GT(idle_phases_held, 0) << where;
  }
}

// Production's return from idle holds the opportunistic job until the next tick applies the busy
// period's mode, since that window is not measured. Where the period runs beside at a cost within
// the target the hold only took the first part of a window from the job (on the H100, S5 gappy
// resnet50 b8 at 1 s phases, half a window of each return on average): the job is not held
// there. Where beside is rationed (here it costs production 30 %) it is held at every return.
TEST(HarvestConcurrency, AReturnIntoBesideIsHeldOnlyWhereBesideFitsTheTarget) {
  for (const double beside_cost : {0.0, 0.3}) {
    auto made = make_policy("harvest", {{"concurrency", 1}, {"in_flight", 4}});
    ASSERT_TRUE(made.policy);
    uint64_t t = 0;
    Gate last{.paused = true};
    auto window = [&](bool production_busy) {
      const bool beside = !last.paused && !last.production_idle_only;
      const uint64_t work =
          !production_busy ? 0 : static_cast<uint64_t>(1000 * (beside ? 1 - beside_cost : 1.0));
      DeviceObservation d{.now_ns = t++ * 50'000'000ull, .window_ns = 50'000'000};
      d.jobs.push_back({.job_id = 1,
                        .job_class = JobClass::production,
                        .launches = work,
                        .completed = work,
                        .in_flight_ns = production_busy ? 50'000'000u : 0u});
      d.jobs.push_back(
          {.job_id = 2, .job_class = JobClass::opportunistic, .launches = last.paused ? 0u : 500u});
      return last = made.policy->decide(d)[1];
    };
    int released = 0, held = 0;
    for (int phase = 0; phase < 20; ++phase) {
      for (int i = 0; i < 20; ++i) window(true);
      for (int i = 0; i < 6; ++i) {
        const Gate idle = window(false);
        if (i < 3) continue;  // idle_windows: idle from the third
        EXPECT_FALSE(idle.paused);
        if (i == 3 && phase >= 10) ++(idle.production_idle_only ? held : released);
      }
    }
    const std::string where = "beside cost " + std::to_string(beside_cost);
    if (beside_cost == 0) {
      EXPECT_GT(released, 5) << where;  // beside runs all but the reference share
    } else {
      EXPECT_EQ(released, 0) << where;
      EXPECT_EQ(held, 10) << where;
    }
  }
}

// Production's start-up is not its pattern: busy phases that end while it warms up (warm_up_ms,
// 750: 15 windows with progress) do not count toward its typical phase. Two phases of 2 windows
// before 1 s ones would otherwise make the median 0.1 s and the idle bound 3.1 ms (63 kernels)
// instead of 1/32 of 1 s (625).
TEST(HarvestConcurrency, ProductionsStartUpDoesNotSetTheIdleQueue) {
  auto made = make_policy(
      "harvest", {{"concurrency", 1}, {"in_flight", 4}, {"idle_queue_ms", 40}, {"queue_ms", 2}});
  ASSERT_TRUE(made.policy);
  uint64_t t = 0;
  auto window = [&](bool production_busy) {
    return made.policy->decide(queue_window(t++, production_busy, production_busy ? 0 : 1000))[1];
  };
  for (const int busy_windows : {2, 2, 20, 20}) {
    for (int i = 0; i < busy_windows; ++i) window(true);
    Gate idle;
    for (int i = 0; i < 10; ++i) idle = window(false);
    // Before a phase is known: queue_ms's 2 ms (40 kernels).
    EXPECT_EQ(idle.max_in_flight, busy_windows == 2 ? 40u : 625u) << busy_windows;
  }
}

// concurrency=2: the budget where every opportunistic job is an MPS client of gpushared (running
// beside production is then at client priority 1), kernel gating and the law elsewhere; a job
// without MPS that joins turns the budget off for the device, its leaving turns it back on.
TEST(HarvestConcurrency, WhereMpsRunsTheBudgetOnlyOnMps) {
  auto made = make_policy("harvest", {{"concurrency", 2}, {"kernel_gating", 1}, {"in_flight", 4}});
  ASSERT_TRUE(made.policy) << made.error;
  uint64_t t = 0;
  auto window = [&](std::vector<bool> opportunistic_on_mps) {
    DeviceObservation d{.now_ns = t++ * 50'000'000ull, .window_ns = 50'000'000};
    d.jobs.push_back({.job_id = 1,
                      .job_class = JobClass::production,
                      .launches = 1000,
                      .completed = 1000,
                      .in_flight_ns = 25'000'000});
    for (size_t i = 0; i < opportunistic_on_mps.size(); ++i)
      d.jobs.push_back({.job_id = 10 + i,
                        .job_class = JobClass::opportunistic,
                        .launches = 100,
                        .mps_client = opportunistic_on_mps[i]});
    return made.policy->decide(d);
  };
  // The budget's gates ask the relay to measure production; gating and the law do not.
  auto budget_in_force = [](const std::vector<Gate>& gates) {
    for (size_t i = 1; i < gates.size(); ++i)
      if (!gates[i].measure_production) return false;
    return true;
  };
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(budget_in_force(window({false})));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(budget_in_force(window({true})));
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(budget_in_force(window({true, false})));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(budget_in_force(window({true, true})));
  // Production alone keeps the device's mode.
  EXPECT_TRUE(budget_in_force(window({})));
  EXPECT_TRUE(budget_in_force(window({true})));
  EXPECT_FALSE(make_policy("harvest", {{"concurrency", 3}}).policy);
}

}  // namespace
// While beside's cost is learnt, the budget's beside periods last learning_period_ms (three 50 ms
// windows); once it rests on doubt_samples pairs, control_period_ms (four). Paused periods last
// reference_period_ms (two). Counted in whole windows: the daemon's windows run a little either
// side of its tick, and periods of three windows 20 us short of 50 ms each are still three windows
// (they ran a fourth when the period's nanoseconds were compared). Production busy all the time at
// one speed whatever the mode (beside costs nothing).
TEST(HarvestConcurrency, PeriodsLastTheirLengthInWholeWindows) {
  // Every window short, or every one long: a run of windows alternately short and long sums to
  // its length as often as not, and passed with the nanoseconds compared.
  for (int64_t jitter_ns : {0, -20'000, 20'000}) {
    auto made = make_policy(
        "harvest", {{"concurrency", 1}, {"in_flight", 4}, {"warm_up_ms", 0}, {"doubt_samples", 4}});
    ASSERT_TRUE(made.policy);
    std::vector<int> runs;  // windows in a row under one gate: a mode's periods
    Gate last{.paused = true};
    for (uint64_t t = 0; t < 200; ++t) {
      DeviceObservation window = queue_window(t, true, last.paused ? 0 : 100);
      window.window_ns = static_cast<uint64_t>(50'000'000 + jitter_ns);
      window.jobs[0].in_flight_ns = window.window_ns;
      const Gate gate = made.policy->decide(window)[1];
      if (t > 0 && gate.paused == last.paused)
        ++runs.back();
      else
        runs.push_back(1);
      last = gate;
    }
    // Learning: paused and beside in turn, each change of mode a pair; beside's cost, known from
    // the third pair (0 +- 0), gives beside all but the reference share, the fourth pair ends
    // the learning.
    ASSERT_GE(runs.size(), 8u) << jitter_ns;
    EXPECT_EQ(runs[1], 3) << jitter_ns;  // a learning beside period
    for (size_t i = 0; i + 1 < runs.size(); i += 2) EXPECT_EQ(runs[i], 2) << jitter_ns << " " << i;
    for (size_t i = 5; i + 1 < runs.size(); i += 2)
      EXPECT_EQ(runs[i] % 4, 0) << jitter_ns << " learnt, run " << i;
  }
}

namespace {

// A production job that replays one CUDA graph an iteration completes a few marks a window: a
// 12 ms graph (±10 %) gives 4 or 5 completions a 50 ms window as the boundaries fall, a ±11 %
// swing of its completions per window that running beside does not cause. Read over the time its
// completions took (JobObservation::paced_in_flight_ns, as the relay reports it) the swing is
// gone (on the H100 a pair of periods of such a job spread 0.127 in log speed per window and
// 0.090 paced, §5j). Over 20 seeds of this model, beside costing 3 / 5 / 7 / 10 / 15 / 30 %:
// beside's share counted 0.938 / 0.903 / 0.852 / 0.385 / 0.239 / 0.112, paced 0.951 / 0.924 /
// 0.726 / 0.416 / 0.270 / 0.113; production 0.972 / 0.955 / 0.940 / 0.962 / 0.964 / 0.966 counted,
// 0.971 / 0.954 / 0.949 / 0.959 / 0.960 / 0.966 paced. A cost of 7 % counted was given the benefit
// of the doubt often enough to take production under its target; paced, its error tells it.
struct GraphOutcome {
  double beside = 0, production = 0;  // beside's share of the windows; production's speed
};
GraphOutcome beside_graphs(bool paced, unsigned seed, double beside_cost) {
  auto made = make_policy("harvest", {{"concurrency", 2}, {"in_flight", 4}, {"kernel_gating", 1}});
  EXPECT_TRUE(made.policy) << made.error;
  constexpr uint64_t kWindowNs = 50'000'000;
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> graph_ms(10.8, 13.2);
  double next_end_ms = graph_ms(random), last_end_ms = 0;
  double beside = 0, speed = 0, windows = 0;
  bool running_beside = false;
  for (int t = 0; t < 20 * 30; ++t) {
    const double window_end_ms = (t + 1) * 50.0;
    uint64_t completed = 0;
    const double last_before_ms = last_end_ms;
    while (next_end_ms <= window_end_ms) {
      ++completed;
      last_end_ms = next_end_ms;
      next_end_ms += graph_ms(random) / (running_beside ? 1 - beside_cost : 1);
    }
    DeviceObservation d{.now_ns = static_cast<uint64_t>(t + 1) * kWindowNs, .window_ns = kWindowNs};
    JobObservation production{.job_id = 1,
                              .job_class = JobClass::production,
                              .launches = completed,
                              .completed = completed,
                              .in_flight_ns = kWindowNs,
                              .mps_client = true};
    if (paced)
      production.paced_in_flight_ns = static_cast<uint64_t>((last_end_ms - last_before_ms) * 1e6);
    d.jobs.push_back(production);
    d.jobs.push_back({.job_id = 2,
                      .job_class = JobClass::opportunistic,
                      .launches = 100,
                      .gate_waits = 10,
                      .mps_client = true});
    const std::vector<Gate> gates = made.policy->decide(d);
    const bool was_beside = running_beside;
    running_beside = !gates[1].paused && !gates[1].production_idle_only;
    if (t < 20 * 5) continue;  // after the warm-up and the first learning
    beside += running_beside ? 1 : 0;
    speed += was_beside ? 1 - beside_cost : 1;
    ++windows;
  }
  return {.beside = beside / windows, .production = speed / windows};
}

// Both ways over 20 seeds, beside costing `beside_cost`: {counted, paced}.
std::pair<GraphOutcome, GraphOutcome> beside_graphs_both_ways(double beside_cost) {
  GraphOutcome counted, paced;
  constexpr unsigned kSeeds = 20;
  for (unsigned seed = 1; seed <= kSeeds; ++seed) {
    const GraphOutcome c = beside_graphs(false, seed, beside_cost);
    const GraphOutcome p = beside_graphs(true, seed, beside_cost);
    counted.beside += c.beside / kSeeds;
    counted.production += c.production / kSeeds;
    paced.beside += p.beside / kSeeds;
    paced.production += p.production / kSeeds;
  }
  std::printf(
      "beside graphs costing %.2f: beside %.3f of the windows counted, %.3f paced; "
      "production %.3f, %.3f\n",
      beside_cost, counted.beside, paced.beside, counted.production, paced.production);
  return {counted, paced};
}

TEST(ConcurrencyBudget, AGraphJobReadOverTheTimeItsCompletionsTookKeepsItsTarget) {
  const auto [counted, paced] = beside_graphs_both_ways(0.07);
  EXPECT_GE(paced.production, 0.945);
  EXPECT_GT(paced.production, counted.production + 0.005);
}

TEST(ConcurrencyBudget, AGraphJobReadOverTheTimeItsCompletionsTookSharesMore) {
  const auto [counted, paced] = beside_graphs_both_ways(0.15);
  EXPECT_GE(paced.production, 0.95);
  EXPECT_GT(paced.beside, counted.beside + 0.02);
}

// An opportunistic job idle by its own choice (starting up, loading) beside busy production for
// 7 s, then running: S1a's pair in the model (production always busy, running beside costs it
// 36 %). The periods of its idle time shared nothing and are not counted as run in their mode, so
// that its first 7 s are met as a fresh job's: counted as beside, they became a debt once beside's
// cost was known, and the job was held for 8.5 s (the H100's S1a, 2026-12-07, one fresh daemon of
// three: 7.6 s, to the end of the window). Over the 7 s after the first second of its work:
// opportunistic 0.036 (0.021 where it never idled) against 0.000 before, production 0.974
// (0.978; 1.000 before).
TEST(HarvestConcurrency, AnOpportunisticJobIdleAtFirstIsMetAsAFreshOne) {
  auto mean_of = [](int idle_windows) {
    Case c{0.30, 0.0, 0.36, 0.5};
    c.spread = 0.05;
    c.start_up_windows = 10;
    c.on_mps = true;
    c.idle_windows = idle_windows;
    const int start_s = idle_windows / 20;
    const Outcome mean = mean_over_seeds(c, 20, start_s + 8, start_s + 1);
    std::printf("idle for %d windows first: production %.3f, opportunistic %.3f\n", idle_windows,
                mean.production, mean.opportunistic);
    return mean;
  };
  const Outcome fresh = mean_of(0), idled = mean_of(140);
  EXPECT_GE(idled.opportunistic, 0.8 * fresh.opportunistic);
  EXPECT_GE(idled.production, fresh.production - 0.01);
  EXPECT_GE(idled.production, 0.95);
}

}  // namespace

}  // namespace gpushare::policies
