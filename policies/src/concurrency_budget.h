// How the opportunistic jobs share production's busy time: measured, not guessed
// (docs/policies.md "The concurrency budget").
//
// Three ways to run an opportunistic job beside a busy production job, each with a cost to
// production and a gain to the opportunistic job that depend on the workloads and the GPU:
// - *paused*: nothing runs; production runs solo (the reference every cost is measured against);
// - *gated* (kernel-level idle gating): it runs only in production's gaps;
// - *beside*: it runs concurrently (on MPS with client priority 1, if the daemon provides it).
// On the H100 beside cost a gappy resnet50 b8 job nothing while the opportunistic job got 0.8 of
// its solo rate, where gating gave it 0.3-0.4; beside a saturating resnet50 b32 job, beside cost
// production 20 % and gating 25 % (mobilenet kernels in its gaps delay its next step). No rate law
// told these apart: production's progress per 200 ms carries ~10 % noise.
//
// The budget runs the experiment all the time: production's busy periods rotate between the
// three modes, each production job's speed on the GPU (kernels completed per second it had work
// in flight: throughput for a GPU-bound loop, latency per request for a server) in each period is
// set against its speed in the period before (mode_costs, below), and what the opportunistic jobs
// launched is averaged per mode. A mode's cost is 1 - its speed over the paused one. A cost that,
// taken `noise_margin` standard errors low, fits the target over all the time the mode could get
// is charged that low value (and, while it rests on fewer than `doubt_samples` pairs of periods,
// more of production's time is paused, so that it is measured again the sooner) (a loss the
// measurements cannot tell from noise does not throttle: on the H100 beside a launch-bound resnet50
// b8 job, a 6.5 % cost taken high held the opportunistic job to 0.28 of its solo rate where MPS
// client priority alone gave 0.86 with production at 1.06); any other cost is taken that many
// standard errors high. The shares then maximise the opportunistic gain with the production loss
// sum(share x cost) within 1 - target: the modes in order of gain per cost, each given what the
// remaining budget allows (a fractional knapsack), the reference keeping `reference_share`, and a
// mode that could still get time at least `explore_share`, so that its cost stays measured. The
// rest is paused.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>

namespace gpushare::policies {

enum class RunMode { paused, gated, beside };
inline constexpr size_t kRunModes = 3;

struct ConcurrencySettings {
  double target = 0.95;           // fraction of its solo speed each production job must keep
  double noise_margin = 1.0;      // standard errors a cost is taken low (fits) or high (does not)
  double reference_share = 0.05;  // paused at least this share (the reference stays current)
  double explore_share = 0.05;    // a mode that could get time is run at least this share
  size_t samples = 16;            // recent differences per pair of modes (per production job) and
                                  // gains per mode (per device)
  double doubt_samples = 8;       // pairs of periods a cost given the benefit of the doubt must
                                  // rest on before the reference share falls to reference_share
  double gaps_limit = 0.9;        // production in flight at least this share of its paused
                                  // windows leaves no gaps for gated to fill (mode_shares)
  bool throughput_cost = false;   // a cost shown in throughput beyond the target's allowance
                                  // and beyond the speed in flight counts (job_cost)
  bool robust_costs = false;      // costs read robustly and rechecked while contested
                                  // (mode_costs, mode_shares: "Robust costs")
  double reference_length = 1;    // a paused period's length over a learning period's (the
                                  // policy's reference_period_ms over learning_period_ms)
  double tail_factor = 0;         // a server's latency may grow at most this much in any mode
                                  // it runs beside for more than kTailExploreShare (mode_shares:
                                  // "A server's tail"); 0: no such bound
  double clear_margin = 2;        // a cost given the doubt on fewer than doubt_samples pairs that
                                  // fits taken this many standard errors high is not measured
                                  // again the sooner, and with every mode run that clear the
                                  // learning's pauses count toward the reference share
                                  // (clearly_fits, reference_kept); 0: neither
};

// The share of the periods paused while beside's cost is not yet known, and while a cost given
// the benefit of the doubt rests on no pair: it falls in proportion to the pairs measured, to
// reference_share at doubt_samples (mode_shares; in time, learning_share). Half: paused and
// beside then alternate, and every period after the first makes a pair.
//
// Why beside first, not every mode at equal shares: on the H100 (S5, resnet50 b8 training 1 s on
// and off beside mobilenet_v2 b64, fresh daemons, 2026-11-26) a benchmark window held 3 s of busy
// production, and learning three modes at equal shares after the warm-up left the opportunistic
// job paused 0.60-0.62 of production's busy time (0.23-0.29 of MPS-prio's harvest). Gated gained
// less than beside at the same or a higher cost in every case measured on MPS (beside a saturating
// resnet50 b32 job, 25 % against 20 %), so it is learnt only where beside alone is shown not to
// fit.
inline constexpr double kLearningReference = 0.5;

// Shares are of production's busy time, and a paused period is shorter than the others (the
// policy's reference_period_ms: one measured window after the settling one, where the others
// hold two or three; on the H100 a pair of periods with one measured window on each side spread
// 0.11-0.14 in log speed, against 0.08-0.14 with two: tools/bench/period_noise.py, 2026-11-27). So
// the share of the periods that a learning rule pauses (kLearningReference: every other one) is,
// in time, this: `period_share` x `reference_length` over what all the periods take. Pure.
double learning_share(double period_share, double reference_length);

// What running in a mode costs a production job, as a fraction of its solo speed (0.1: 10 %
// slower), with the standard error of that estimate.
struct ModeCost {
  double harm = 0;
  double error = 0;
  double samples = 0;  // what the estimate is worth in direct pairs of periods (mode_costs)
  // The least cost one direct pair against paused read (1 - e^(its largest difference)); 1 where
  // none is kept. With robust costs, a reading some pair contests (this within the target's
  // allowance) is rechecked the sooner (mode_shares).
  double least_harm = 1;
};

// Each mode's cost (worst over the production jobs; none: not measured yet) and gain (the
// opportunistic jobs' launches per sample; none: not measured yet). Index: RunMode.
struct ModeMeasures {
  std::array<std::optional<ModeCost>, kRunModes> cost{};
  std::array<std::optional<double>, kRunModes> gain{};
  // The share of a paused window in which the busiest production job had work in flight (the
  // median of recent paused windows; none: not measured yet). Gated runs the opportunistic jobs
  // only while no production job has work in flight: near 1, it has nothing to run in.
  std::optional<double> busy;
  // Per mode: whether the costliest production job took the mode's loss as queueing rather than
  // as lost work (or that is not known yet): its throughput (kernels per window of its busy time),
  // taken kLostWorkMargin standard errors low, fell by less than kQueuedShare of what its speed in
  // flight, taken low, fell (queues_the_loss). An
  // open-loop server does the work its requests bring, only later: on the H100 (S2's transformer
  // server, call 77) its kernels per busy window were 464-568 beside and 416-768 paused while its
  // speed in flight fell from about 20 to 12 kernels per ms. A closed loop loses the work itself,
  // gaps between its kernels or not (a launch-bound job, CPU work between steps): no queue for a
  // mode to stretch ("A server's tail").
  std::array<bool, kRunModes> queues{};
};
inline constexpr double kQueuedShare = 0.5;
// Lost work must be shown beyond a server's arrival noise: a Poisson server's kernels per window
// follow its arrivals. On the H100 (S2's transformer server, 2026-11-27 call 84) they spread
// 31-50 % (coefficient of variation) over its paused windows, and with the throughput taken one
// standard error low the budget took the server for a closed loop in 4 of 7 fresh daemons (1 of
// 4 in call 81): their tail bound off, beside ran 0.13-0.21 of its busy time. Not yet measured on
// the GPU with the two errors. A closed loop's
// work per window spreads far less (a training loop's few percent), and its loss shows beyond
// two standard errors as beyond one. (An error read from a few pairs is itself noisy, and a
// server's per-window work also falls while a costly mode queues it: two errors ask for more
// evidence, they do not settle it; brief_exposure does not rely on it.)
inline constexpr double kLostWorkMargin = 2;
// Whether a production job queues a mode's loss rather than losing the work (ModeMeasures::queues)
// from its cost in throughput and in speed in flight; a throughput cost not known: it does.
// Pure.
bool queues_the_loss(const std::optional<ModeCost>& throughput, const ModeCost& in_flight,
                     const ConcurrencySettings& settings);

// Whether a mode's cost gets the benefit of the doubt (mode_shares): taken `noise_margin`
// standard errors low it fits `allowed` (the target's allowance less the debt) over all the time
// but the reference share, and the cost and its error are each within twice the target's
// allowance. Pure.
bool given_the_doubt(const ModeCost& cost, const ConcurrencySettings& settings, double allowed);
// Whether a cost given the doubt on fewer than doubt_samples pairs of periods fits `allowed` even
// taken `clear_margin` standard errors high (over all the time but the reference share), on at
// least kClearPairs pairs: it does not rest on the doubt, so the reference share is not raised to
// measure it again the sooner (mode_shares). That share is what a fresh window's harvest beside
// a cheap job pays: on the H100 (S5 gappy resnet50 b8 at 4 s on and off, 2026-12-06) the
// benchmark's busy windows were paused 0.15 of the time, about half of it while beside's reading
// rested on 3-7 pairs. Over the 172 daemon logs of 2026-11-26 to 2026-12-06 (H100 and H200, every
// scenario; docs/bench-results up to 2026-12-06-a) whose reading came to rest on 8 pairs or more,
// a reading clear by two errors came on 4-7 pairs in 45 of the 106 whose cost then stayed within
// the allowance, and in 2 of the 66 whose cost did not (it rested at 0.055 and 0.060); clear by
// one error on 3 pairs in 83 and 15 (up to 0.133); by three errors on 4 pairs in 26 and 1
// (tools/bench/clear_readings.py). Pure.
inline constexpr double kClearPairs = 4;
bool clearly_fits(const ModeCost& cost, const ConcurrencySettings& settings, double allowed);
// The cost the budget charges a mode: taken low where it is given the doubt, else high. Pure.
double charged_cost(const ModeCost& cost, const ConcurrencySettings& settings, double allowed);
// A server's tail. A production job that leaves gaps between its kernels (its paused windows in
// flight less than gaps_limit of the time: a server between requests) and does the same work in
// every mode (ModeMeasures::queues: an open loop) turns a mode's loss of speed into queueing: at
// utilisation `busy`, a mode that costs `cost` of its speed stretches each request's time in the
// system by about sojourn_factor(busy, cost) = (1 - busy) / (1 - busy - cost) (an M/M/1 queue's
// time in the system, 1 / (service rate - arrival rate), before and after; infinite where the mode
// leaves it less speed than its load). Its p99 follows the requests that meet the mode, so a mode
// run for more than about 1 % of the time sets it, however small its share of the budget's mean
// loss. On the H100 (S2, a Poisson transformer_infer_b8 server at loads 0.3 and 0.5 beside
// transformer training, one GPU, 8 repetitions, 2026-11-27 call 77) beside cost it 27-50 %, in
// flight 52 % of its paused windows (a factor of 3.7), ran 5-9 % of its busy time on the budget's
// allowance, and its p99 was 2.3 and 3.3 times isolated's while its p50 stayed within 8 and 16 % of
// it. So, with tail_factor, where production leaves gaps and queues a mode's loss, a mode whose
// cost, read at its estimate (a cost read too low costs a server's p99 far more than its mean, so
// the benefit of the doubt does not apply), stretches the server's requests beyond tail_factor gets
// no share of the allowance, only kTailExploreShare of the time (its cost stays measured, should
// the server's load fall). (Taken noise_margin standard errors high instead, on the H100 over 12
// repetitions of S2's resnet50 server the harvest fell to about half at load 0.3 and a third at
// 0.5 while the p99 against each repetition's isolated run did not move: docs/policies.md, "A
// server's cost, taken high".) Pure.
double sojourn_factor(double busy, double cost);
// Whether a mode costing `cost` stretches the requests of a server in flight `busy` of its time
// beyond tail_factor (with tail_factor set): the test of the tail bound (mode_shares) and of a
// brief exposure (brief_exposure). Pure.
bool stretches_requests(double busy, double cost, const ConcurrencySettings& settings);
// The factor by which a server's p99 time in the system grows where `share` of its requests take
// `stretch` times as long (sojourn_factor) and the rest as long as before, times in the system
// exponential as in an M/M/1 queue: the x at which (1 - share) e^-x + share e^(-x / stretch) =
// 0.01, over ln 100 (the p99 of e^-x). At a share of 0.1, 1.20 for a stretch of 2 and 1.86 for 3.7
// (S2's transformer server beside, call 77); at kTailExploreShare, 1.03 for 3.7. An infinite
// stretch (a mode that leaves the server less speed than its load) gives infinity from a share of
// 1 % on. Pure.
double p99_factor(double share, double stretch);
inline constexpr double kTailExploreShare = 0.005;
// A held reading is rechecked where its noise cannot tell it from one that fits the tail (taken
// `noise_margin` standard errors low, it would not stretch the server's requests beyond
// tail_factor) and where, taken as many errors high, running it this share of production's busy
// time would not stretch the server's p99 beyond tail_factor (p99_factor). The mode then runs
// this share, one window at a time (brief_exposure), taken from paused's time and then from the
// other mode's (beside a server gated, cheap, takes all the time the allowance gives), whether
// production is owed a loss or not (as a robust recheck), its charged cost set aside from the
// allowance as exploring's is. Held at kTailExploreShare instead, a reading got
// a pair of periods about every 10 s of busy production and stayed what a fresh daemon's first
// pairs had read: on the H100 (S2's resnet50 server beside transformer training, 2026-11-28 calls
// 89-91) 6 of 12 daemons read beside at 0.13-0.34 +- 0.05-0.13 and held it for the rest of the
// run (the opportunistic job at 0-0.34 of its solo speed), where the others read it at -0.35 to
// 0.08 and ran it (0.6-0.9). At this share a pair comes about every half second of busy
// production: half of a reading's `samples` are renewed within a 4 s benchmark window. In the
// model (AServersMisreadIsRecheckedNotKept: 40 fresh daemons beside a Poisson server that beside
// slows by 3 %) the opportunistic job got 0.634 of its solo speed with the recheck and 0.475
// without; a server that beside slows by 35 % met it no more (0.007 of its busy time, 0.005
// without): no reading of such a mode is contested. On the H100 (calls 92-94, 16 repetitions of
// that server) the harvest went from 0.76x to 0.85x of MPS-prio's at load 0.3 and from 0.84x to
// 0.79x at 0.5, the paired p99 from 1.24x to 1.18x and 1.45x to 1.24x isolated's
// (docs/benchmarks.md 5c).
inline constexpr double kTailRecheckShare = 0.1;
// The share of production's busy time for each mode (sums to 1). Pure; see the header comment.
// Beside is learnt first, at kLearningReference paused and the rest beside; gated only once it is
// needed (beside's cost leaves production's time paused), at a quarter of the time beside leaves,
// and only where production leaves gaps (its paused windows in flight less than gaps_limit of the
// time): gated runs the opportunistic jobs only in those gaps. On the H100 (2026-11-26, calls
// 27-29, S5 saturating resnet50 b32 training 1 s and 4 s and a transformer inference loop, each job
// in flight a median 99-100 % of its paused windows) gated was learnt for 4-17 windows a run, read
// costs up to 0.12 and gained 0-4 launches a window in seven runs of nine (beside: 375-670; 97 and
// 344 in the other two); a Poisson server (S2), in flight 52-65 %, is where it harvests.
// `debt`: the production loss already spent beyond what the target allows, to be paid back
// (reduces the budget).
std::array<double, kRunModes> mode_shares(const ModeMeasures& measures,
                                          const ConcurrencySettings& settings, double debt = 0);

// The recent periods' modes, each weighted by how long ago it ran (a period's weight decays by
// 1 / kDebtMemory per period), are what production has lost so far: sum(weight x cost, taken low
// by its noise: a loss that cannot be shown is not repaid; a mode whose cost is not yet known is
// left out) beyond (1 - target) x sum(weight) is the debt, paid back over kDebtHorizon periods; a
// loss below the target is not banked. Learning the costs (at equal shares, as until 2026-11-26,
// on the H100 about 1.5 s of busy production) spent 4 % of a 6 s benchmark window beyond the
// target beside a saturating job; with the debt the periods after it repay it. Over 5 periods
// (1 s of busy production; 15 until 2026-11-26), so that it is repaid within such a window: in
// the model of one (AFreshBudgetHarvestsInTheBenchmarksWindow) production kept 0.943 beside a job
// that running beside slows by 25 % with 15 periods, 0.948 with 5; a gappy job's harvest did not
// change (no debt there).
inline constexpr double kDebtMemory = 50;
inline constexpr double kDebtHorizon = 5;
double loss_debt(const std::array<double, kRunModes>& weights, const ModeMeasures& measures,
                 const ConcurrencySettings& settings);

// Whether the reference share is kept already: the plan pauses production no more than
// reference_share of its time (`paused_share`: no reading asks for more), and the recent periods
// (`ran`, weighted as for loss_debt) paused it more than that. The reference share is a floor on
// production's recent paused time, not a rotation of its own: the paused periods that learnt
// beside's cost count toward it, so that a fresh job's reference periods do not come on top of
// its learning's. In the budget's rotation (credits, next_period) a paused period due only for
// the reference share waits while this holds. On the H100 (S5 gappy resnet50 b8 at 4 s on and
// off, 2026-12-06) a fresh daemon paused production in 5 periods of the benchmark's 4 s busy phase
// (10 of its 84 busy windows): 2 to learn beside's cost, 1 to bring its pairs to 4, and 2 more
// at the reference share's rotation, 26 and 38 windows after the one before. Pure.
bool reference_kept(const std::array<double, kRunModes>& ran, double paused_share, bool clear,
                    const ConcurrencySettings& settings);

// What each mode costs one production job, from the differences between adjacent periods.
// Production's speed wanders: on the H100 (resnet50 b8 training beside an MPS client, 2026-11-26)
// the log of its per-window speed differed by 0.085 (robust standard deviation) between adjacent
// windows and by 0.21 between windows 2 s apart, so a paused reference averaged over the sparse
// paused periods of the last 20 s, set against beside's last second, read a cost of 15-20 % where
// the robust medians of the whole run differed by 4 %, and the budget paused the opportunistic job
// for a quarter of production's busy time. Each period is therefore set only against the period
// just before it: the log of its speed (work over busy time, its measured windows together) less
// the previous period's, where their modes differ and nothing (an idle phase, a change of
// mechanism) came between them. The drift cancels in each difference.
//
// Differences are kept by pair of modes (index: kPairPausedGated, kPairPausedBeside,
// kPairGatedBeside; each the log speed of the later-listed mode less the earlier one's). A mode's
// effect e (log of its speed over the paused speed; paused: 0) is the weighted least-squares fit
// of all three pairs' means (gated can be measured against paused through beside and the reverse,
// as the shares leave few periods of one next to the other); its cost is 1 - exp(e), its error
// from the pairs' spread around their means.
inline constexpr size_t kPairPausedGated = 0, kPairPausedBeside = 1, kPairGatedBeside = 2;
using PairedDifferences = std::array<std::deque<double>, 3>;

// A cost is known once its effect is pinned down as well as by this many direct pairs.
inline constexpr size_t kMinCostSamples = 3;
// ... or sooner, once kClearCostSamples direct pairs against paused each read a cost of at least
// kClearCost: a cost that large is not noise (on the H100 a launch-bound job's pairs spread by
// 0.15 in log speed: two such pairs by chance are about one in a thousand), and each further
// learning period of such a mode costs production the most. On the H100 (S5, transformer_infer_b8,
// 2026-11-26 call 30) beside's cost read 0.34-0.41 +- 0.01-0.03 in three runs, and each of its
// learning periods (4-5 windows) cost production 2-3 % of the benchmark window's busy time.
inline constexpr size_t kClearCostSamples = 2;
inline constexpr double kClearCost = 0.25;
// A costly mode's exposure. A server queues a mode's loss (sojourn_factor), and its queue grows
// for as long as the mode runs unbroken. On the H100 (S2, the transformer server beside
// transformer training, 2026-11-27 call 78) every request of a fresh daemon's first window that
// took over 1.2 times isolated's p99 met one of beside's two learning periods (150 ms each,
// beside costing it about 50 %), up to 53 ms against 9 ms; its windows after the learning met the
// p99 at load 0.3. In an M/M/1 model of that server (loads 0.3 and 0.5, a mode costing 35-50 % run
// for two periods after the warm-up, 4 s windows) the p99 was 1.17-2.03 times isolated's with
// periods of 150 ms, 1.12-1.39 with 100 ms and 1.05-1.13 with 50 ms. So where production may be
// a server (`busy`, its paused windows' in-flight share, below gaps_limit, or not yet measured),
// a mode runs one window at a time (brief) while its cost is not yet known (`cost`: the budget's
// estimate, worst over the production jobs), and where the estimate would stretch a server's
// requests beyond tail_factor (sojourn_factor at `busy`; with busy unknown, a clear cost,
// kClearCost; with no tail_factor, never: it protects the tail, as the bound does): entered from
// paused without a settling window (nothing of the opportunistic jobs is queued there; its first
// kernels' ramp-up falls in the measured window, which errs by a few of its milliseconds) and
// never twice in a row. Not on the latest pair alone: on the H100 (calls 82-83) the transformer
// server's speed in flight spread about 20 % from one window to the next, its pairs of one window
// a side read beside's cost at 25 % after 36 % (call 82) and below what stretches its requests
// (call 83), and each time beside's next learning period ran three windows. Whether production
// queues the loss (ModeMeasures::queues) is not asked: its throughput follows a Poisson server's
// arrivals (in call 84 four of seven fresh daemons took the server for a closed loop, their tail
// bound off, and ran beside in periods of three and four windows), and a closed loop with gaps
// loses little to periods of one window (in the model of a launch-bound loop in flight 0.65 of
// the time that beside slows by 20 %, over 40 seeds production kept 0.954 against 0.953 without,
// the opportunistic job 0.370 against 0.375). Where the estimate is cheaper, or production keeps
// the GPU busy (no gaps, no queue; and one window a side is a noisier pair: in the model of a
// saturating job with +-30 % noise per window, NoisyWindowsStillRationCostlyConcurrency,
// production kept 0.915 instead of 0.963 when it applied there too), its periods are as long as
// the others'. Pure.
bool brief_exposure(const std::optional<double>& busy, const ConcurrencySettings& settings,
                    const std::optional<double>& cost);

// Each difference is clipped to this (in log speed, a factor of e): one period stalled for other
// reasons (a host-side pause, a checkpoint) weighs no more than a mode that halved the speed.
inline constexpr double kMaxDifference = 1.0;

// Robust costs (ConcurrencySettings::robust_costs). A production job's speed has heavy tails: on
// the H100 (S5 gappy and S1b, 2026-11-26/27, tools/bench/stalls.py) 1.1-2.4 % of its 50 ms windows
// ran at less than 0.6 of the three before them in their run, in every mode (paused: 2.4 %), and a
// pair of periods holding one differs by 0.5-1.5 in log speed where the rest spread by about 0.1.
// Two such pairs among a gappy resnet50 b8 job's first four read running beside as a 40 % cost
// (2026-11-27, call 62; beside then got 0.05 of production's busy time for the rest of the run)
// where its other pairs read 0-3 %. So, with robust costs:
// - each pair's differences, once there are kRobustSamples, are winsorized: taken at most
//   kRobustSpread robust standard deviations (1.4826 x the median absolute deviation, at least
//   kRobustFloor) from their median, so a stall weighs as an ordinary bad pair;
// - a difference at the clip (kMaxDifference) is no evidence of a clear cost;
// - a cost held against a mode (not given the doubt) on fewer than doubt_samples pairs, where a
//   direct pair read it within the target's allowance, is rechecked: the mode runs at least the
//   share the doubt would pause (kLearningReference in proportion to the pairs missing), debt or
//   not, so that its reading rests on enough pairs before it holds the opportunistic job back for
//   good (mode_shares).
inline constexpr size_t kRobustSamples = 5;
inline constexpr double kRobustSpread = 3;
inline constexpr double kRobustFloor = 0.02;

// Costs of gated and beside (index: RunMode; paused: none, it is the reference); none where not
// yet known. `robust`: see "Robust costs". Pure.
std::array<std::optional<ModeCost>, kRunModes> mode_costs(const PairedDifferences& differences,
                                                          bool robust = false);

// A production job's speed is its work per second *in flight*, so that a server's load does not
// read as a cost. But a job that works on the CPU between its kernels can lose where the speed in
// flight does not show it: on the H100 (2026-11-27, §4t) a launch-bound mobilenet_v2 b16 training
// job with 10 ms of CPU time per step lost 10-14 % of its steps beside transformer training (what
// MPS client priority cost it too), and its pairs of periods read that as 2.6-5.8 % in kernels
// per ms in flight and 8.9-11 % in kernels per window of its busy time: beside, it had work in
// flight for less of each window. The same pairs read the two measures a median 0.001-0.014
// apart for every job that kept the GPU busy (S5 resnet50 b8 and b32, S1b), and for a Poisson
// server (S2) the throughput followed its arrivals (one pair's noise 0.26-0.61 in log speed,
// against 0.09-0.14 in flight).
// So, with ConcurrencySettings::throughput_cost, a mode's cost to one job is its cost in
// throughput (kernels per window of busy time) where that, taken `noise_margin` standard errors
// low, is above both the target's allowance (1 - target) and the cost in flight taken as low:
// a loss the throughput shows beyond doubt and the speed in flight misses. Otherwise, and
// without the setting, its cost in flight. Pure.
std::optional<ModeCost> job_cost(const std::optional<ModeCost>& in_flight,
                                 const std::optional<ModeCost>& throughput,
                                 const ConcurrencySettings& settings);

// A loop that became a server. The budget reads production's in-flight share (`busy`) from its
// paused windows only, and where beside costs little they are the reference share (5 %) of its
// busy time: a reading taken while production kept the GPU busy is then kept for long after it
// started to leave gaps, and so are the costs measured then. On the H100 (S2, the resnet50 server
// at load 0.5, 2026-11-28 call 93) a fresh daemon's first paused windows met the server in flight
// all of each (its queue full from its start), read beside's cost at 4-5 % as a loop's, took it
// for a loop (no tail bound) and ran beside 0.95 of the time; once its requests came at their
// rate one paused window in 7 s came, the 16 kept read 1.00 for the rest of the run, and the
// server, beside slowing it by about 17 % (35 kernels per ms in flight paused against 26-34
// beside), kept its queue: p50 83.8 ms and p99 199 ms against 8-13 and 20-60 isolated. A
// window of another mode can only be busier than a paused one at the same load (production is
// slowed there, or runs as a loop): where the recent ones (`running`, their median over
// ConcurrencySettings::samples windows with work) are in flight less than
// gaps_limit - kLoopLeftMargin while the paused ones (`paused`) read gaps_limit or more,
// production has changed since the paused ones. Pure.
inline constexpr double kLoopLeftMargin = 0.05;
bool loop_left(const std::optional<double>& paused, const std::optional<double>& running,
               const ConcurrencySettings& settings);

// A period's speeds, in log: its work per second in flight and per second of its windows.
struct PeriodSpeeds {
  double in_flight = 0, throughput = 0;
};

// A start-up that outlasts the warm-up. The warm-up counts windows with progress (the policy's
// warm_up_ms), and a job that begins with a trickle of kernels (loading, compiling, a few probes a
// window) spends it before its work starts: on four H200s (S5 gappy resnet50 b8 beside
// mobilenet_v2 b64, 2026-11-28 call 99) the daemons of each lane's first repetition, with eleven
// workers starting at once, met production at 2-6 kernels a window (the median of its paused
// windows; 1.1-4.3 kernels per ms in flight) for 2 s, against 700-1,800 a window (21-33 per ms)
// once it worked, read beside's cost from those periods' pairs (-0.12 +- 0.66 and 0.47 +- 0.12 on
// 3 pairs) and held it: beside ran 0.04-0.12 of production's busy time for the whole window (the
// opportunistic job at 0.02-0.09 of its solo speed), where the same rows ran it about 0.9 in the
// later repetitions. A paused period whose work per window is more than kJumpWork above the
// median of the job's paused periods before it (in log: a factor e^2, 7.4; the trickle's were
// e^5.1-e^6.6 below the work's) and whose speed in flight is more than kMaxDifference above
// theirs (e; e^1.6-e^3.3) says production's solo speed has changed: what was learnt is dropped
// and learnt again (as where a loop left, loop_left). Both, so that neither a server whose load
// grows (its work per window follows its arrivals, its speed in flight does not) nor a job whose
// paused periods often fall in the slow windows of its returns from idle (work and speed alike
// within e^1.2 in the model of 3 windows at 0.3 of its speed after every idle phase: over 960
// model runs of loops and servers the speed alone fired in 183, both in none) is taken for one;
// a stall only slows a period. At least kJumpPeriods earlier periods, so that one odd period does
// not make the median: on two H200s (S1b, call 101) a daemon with the speed rule alone relearnt
// on a median of two paused periods, one of them the job's warm-up steps before a pause of the
// harness (26-30 kernels per ms against its work's 40-42; its work per window was within e^2 of
// theirs). Pure.
inline constexpr size_t kJumpPeriods = 3;
inline constexpr double kJumpWork = 2 * kMaxDifference;
bool speed_jumped(const std::deque<PeriodSpeeds>& paused, const PeriodSpeeds& period);

// A start-up still climbing when the warm-up's time is spent. On four H200s (S1b, resnet50 b8
// training beside b32 training, 2026-11-28 call 103) a fresh daemon's warm-up (15 windows with
// progress) ended while production still climbed: 9, 6 and 4 kernels per ms in flight in its
// last windows, then 27, 33 and 35 (its work 107 kernels a window, then 762, 1,578, 1,730).
// The first pairs of periods fell on that climb, read beside as a clear cost (0.50 +- 0.16 on
// two pairs) and held it: beside ran 0.09 of production's busy ticks and the opportunistic job
// got 0.455 of its solo speed, where the other GPUs' daemons harvested 0.78-0.85. So the warm-up
// lasts, beyond warm_up_ms and up to kWarmUpLimit times it, while the median log speed in
// flight of the job's last kSettleWindows windows with progress is more than kSettleRise above
// that of the kSettleWindows before them (a factor e^0.5, 1.65: the climb above rose by e^1.8,
// a steady job's windows spread about 0.1 in log speed, so its medians of three seldom differ
// by half of that factor). Only a rise: a start-up climbs, and a dip is a stall or a phase's
// end. A trickle that stays a trickle is not a climb; its end is speed_jumped's.
// `log_speeds`: the job's windows with progress, oldest first (at least the last 2 x
// kSettleWindows). Pure.
inline constexpr size_t kSettleWindows = 3;
inline constexpr double kSettleRise = 0.5;
inline constexpr double kWarmUpLimit = 2;
bool still_climbing(const std::deque<double>& log_speeds);

class ConcurrencyBudget {
 public:
  explicit ConcurrencyBudget(ConcurrencySettings settings) : settings_(settings) {}

  // One measured window of production job `job` in the current period, run in `mode`: `work`
  // (kernels completed) over `busy_ns` (time it had work on the GPU) and over `window_ns` (the
  // window's length; 0: as busy_ns, a job in flight all the window), for its speed in flight and
  // its throughput (job_cost). A window without work or busy time says nothing. Returns whether
  // the window counted.
  bool record_speed(uint64_t job, RunMode mode, double work, double busy_ns, double window_ns = 0);
  // What the opportunistic jobs launched together over one window's time in `mode`.
  void record_gain(RunMode mode, double launches);
  // The share of one window in `mode` in which the busiest production job had work in flight
  // (ModeMeasures::busy reads the paused windows: the others are production slowed). A window
  // of the other modes counts only where production did work in it (`working`: one it left
  // part-way, into an idle phase, is not its pattern); where they say production now leaves
  // gaps that its paused windows never showed (loop_left), what the budget learnt is dropped
  // and learnt again (relearnt).
  void record_busy(RunMode mode, double share, bool working = true);
  // How often production was found changed (record_busy: a loop that left gaps; next_period: a
  // solo speed that jumped, speed_jumped) and what was learnt of it dropped.
  int relearnt() const { return relearnt_; }
  // Drops the production jobs not in `alive`, and with any of them the in-flight readings
  // (ModeMeasures::busy), which were of the jobs there were.
  void retain(const std::set<uint64_t>& alive);
  // Something came between the last period and the next (production idled, the mechanism
  // changed): the next period is not set against the last, and the current one is dropped.
  void break_sequence();

  ModeMeasures measures() const;
  std::array<double, kRunModes> shares() const;
  // Whether running in `mode` costs production no more than the target allows, as the budget
  // charges it (charged_cost; the debt included): the budget then gives it all of production's
  // time but the reference share, and a window of it that no period measures costs production
  // nothing beyond the target. Paused always; a mode whose cost is not yet known never.
  bool fits_target(RunMode mode) const;
  // Whether beside's cost is still being learnt: not yet known, or known from fewer than
  // doubt_samples pairs of periods (the policy then runs shorter periods: learning_period_ms).
  bool learning() const;
  // Ends the current period, run in `finished` for `length` (over a period of the other modes:
  // a paused period is shorter), and returns the mode of the next: each mode's periods make up
  // its share of the time, spread evenly (smooth weighted round robin, weighted by length).
  // A brief mode (brief_exposure) is not run twice in a row: its credit beyond one period is
  // forgone, so that it does not run longer later to make up for it.
  // `demand`: whether some opportunistic job wanted to run in the period (a paused one: waited
  // at its gate). A period in which none did shared nothing, whatever its mode, and is left out
  // of the recent periods (ran_: loss_debt, reference_kept), as if it had not been run: the
  // budget then meets the job's return as it meets a job that never idled. Counted as their
  // mode, the periods of an opportunistic job idle by its own choice
  // (loading, starting up) beside busy production became a debt once the mode's cost was known:
  // on the H100 (S1a, 2026-12-07) after 8 s of production alone beside an idle opportunistic
  // job, a fresh daemon read beside's 36 % cost and held beside for the whole 7.6 s left of the
  // benchmark's window, where the others, whose job had not idled as long, ran it again after
  // 1-3 s.
  RunMode next_period(RunMode finished, double length = 1, bool demand = true);
  // Whether `mode` runs one window at a time (brief_exposure, worst over the production jobs;
  // paused never).
  bool brief(RunMode mode) const;
  // The mode of the first period after production's return from a long idle (`current`: the
  // period's mode before it): where it is paused and a mode that runs the opportunistic jobs is
  // due too (behind its share), that mode. Production's first measured windows after a return are
  // its least steady (on the H100, 2026-11-27, S5: their 10th percentile of speed 0.35-0.49 of
  // the steady speed in 1 s phases, 0.06 in 4 s phases), and a paused period there, of one
  // measured window, would make such a window the reference: every mode would read as cheaper.
  // In a mode that runs the opportunistic jobs it makes that mode read as costlier, which errs
  // toward production. In the model of a ramp-up longer than the settling windows
  // (APhasesRampUpIsNotTheReference) production kept 0.931 without this, 0.985 with it. With
  // paused and beside alone paused is due only where beside is not, and it stays.
  RunMode resume_mode(RunMode current) const;
  // ModeMeasures::busy: the median in-flight share of the recent paused windows (none: fewer than
  // kMinCostSamples).
  std::optional<double> paused_busy() const;

 private:
  struct Period {
    RunMode mode = RunMode::paused;
    double work = 0, busy_s = 0, window_s = 0;
  };
  struct Series {  // one production job's
    Period current;
    std::optional<std::pair<RunMode, PeriodSpeeds>> last;  // the previous period's mode, speeds
    PairedDifferences differences;                   // of the speed in flight
    PairedDifferences throughput_differences;        // of the throughput
    std::deque<PeriodSpeeds> paused_speeds;          // its paused periods' (speed_jumped)
  };
  template <typename T>
  void add(std::deque<T>& samples, T value) const;  // keeps the last settings_.samples
  bool brief(RunMode mode, const ModeMeasures& measures) const;
  // Returns whether the period was a paused one whose speed jumped (speed_jumped).
  bool close_period(Series& series, RunMode finished);
  // Drops what was learnt of production (its costs, the gains beside it, its in-flight readings;
  // not the debt, ran_: its loss so far is its own).
  void relearn();

  ConcurrencySettings settings_;
  std::map<uint64_t, Series> series_;  // by production job
  std::array<std::deque<double>, kRunModes> gains_;
  std::deque<double> paused_busy_;   // record_busy's paused windows
  std::deque<double> running_busy_;  // ... and the other modes' windows with work
  int relearnt_ = 0;
  std::array<double, kRunModes> credit_{};
  std::array<double, kRunModes> ran_{};  // periods run in each mode, decayed (loss_debt)
};

}  // namespace gpushare::policies
