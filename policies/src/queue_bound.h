// How much an opportunistic job may keep queued on the GPU where nothing else bounds it: while
// production idles, and while it runs beside production (docs/policies.md "harvest").
//
// Production, returning from an idle phase or paused by the concurrency budget, holds the
// opportunistic job's next launch at once, but not what it has already queued: that runs first or
// beside production, at production's expense. On the H100 (S5, a transformer inference server
// 1 s on / 1 s off beside mobilenet_v2 b64 training on gpushared's MPS, 2026-11-26) the job kept
// up to two training steps queued (942 kernels), and production ran at half its speed for the
// first 70-100 ms of every on-phase: about 5 % of its busy time, which the budget never saw (those
// windows are not measured) and which left production at 0.92 of its solo speed. A fixed count
// does not fit every job: four kernels of a GEMM-heavy step can take longer than four hundred of
// mobilenet's. The bound is therefore a time: about `queue_ms` of the job's own work, counted in
// kernels at the rate it launched in that state over its recent windows.
//
// While production idles the bound is paid once per return of production, not at every pause:
// it may be longer there, as far as production's busy phases make it a small share of them
// (idle_queue_ms below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace gpushare::policies {

// Windows' rates kept per job and state, and how many make an estimate: the median of the last
// eight (400 ms at the daemon's tick) is not moved by the window in which production returned (the
// job held part of it) or by the burst after a pause.
inline constexpr size_t kQueueRateWindows = 8;
inline constexpr size_t kQueueRateLeast = 3;
// The largest bound the shim takes (the `in_flight` parameter's range).
inline constexpr uint32_t kMostQueued = 1024;

// Kernels that make about `queue_ms` of work for a job launching `kernels_per_s`, at least `least`
// (a bound of 1 leaves the GPU idle while the job's thread wakes to launch the next kernel) and at
// most kMostQueued. Pure.
uint32_t queue_bound(double kernels_per_s, double queue_ms, uint32_t least);

// The queue allowed while every production job idles, in ms: production meets it once per busy
// phase, so it is kept to kReturnShare of production's typical busy phase (its median over the
// last kBusyPhasesKept), at least `queue_ms` (the bound beside production; also the bound until a
// phase is known) and at most `most_ms`; 0 where `most_ms` is 0 (no bound while idle). Pure.
//
// What the queue costs each side, on the H100 (S5, mobilenet_v2 b64 training on MPS at client
// priority 1, 2026-11-26/27):
// - the opportunistic job, while production idles: 8 ms cost it 11-15 % of its speed (1 s phases;
//   and 0.5 s phases, where 1/64 of the phase had left the bound at 8 ms: 0.86 of its solo
//   speed), 16 ms 3-4 %;
// - production, in the window of its return, against its steady paused windows
//   (tools/bench/loss_by_window.py, `return` windows, calls 73-74, 1 s phases, 15.6 ms): a gappy
//   resnet50 b8 job nothing measurable (under 0.5 ms a return, 445 returns), a transformer
//   inference server 3-4 ms a return (80 returns), a quarter of the queue.
// So 1/32 of the phase costs a server like that about 1/128 of its busy time (0.8 %) and gives
// 0.5 s phases the 16 ms that 1 s phases have; 1/64 (until 2026-11-27) cost it half that and the
// job a tenth of its idle speed at 0.5 s phases. A server busy 50 ms at a time (the simulator's
// idle_gaps trace) keeps `queue_ms`: production kept 0.960 of its speed at 8 ms and 0.933 at 16.
inline constexpr double kReturnShare = 1.0 / 32;
inline constexpr size_t kBusyPhasesKept = 5;
double idle_queue_ms(std::optional<double> busy_phase_s, double queue_ms, double most_ms);

// The queue allowed beside busy production, in ms: `loop_ms` where production keeps the GPU busy
// (`busy`, its paused windows' in-flight share, at least `gaps_limit`: a loop), `queue_ms`
// elsewhere (a server, whose requests arrive to the queue, or production not yet read). 0: no
// bound. Pure.
//
// A loop on MPS meets the queue's kernels only behind its own (client priority puts its blocks
// first) and at the start of a paused period, whose first window is not measured (it settles).
// The bound costs the opportunistic job beside it: on four H200s (S5 gappy resnet50 b8, 1 s on
// and off, beside mobilenet_v2 b64, 2026-11-28 call 99, 4 repetitions, each lane's first left
// out) it got 0.70 of its solo speed while production was busy at 8 ms, 0.76 at 16 ms and 0.80
// without a bound, against MPS-prio's 0.83; production (each repetition against its own
// isolated run) kept 0.98, 0.96 and 0.93 (MPS-prio 1.04; where the unbounded row lost was not
// traced). Beside S2's resnet50 server at load 0.5 (3 repetitions) the p99 was 1.29, 1.63 and
// 1.21 times isolated's (paired; one repetition without a bound at 38 times), MPS-prio's 1.17: a
// server keeps the shorter queue. With 16 ms beside loops (calls 100-102, 11 repetitions of S5
// gappy at 1 s and 3 at 4 s against the same build at 8 ms) the job got 0.747-0.754 against
// 0.661-0.720, and production the same within the repetitions' spread (docs/benchmarks.md 5e).
double beside_queue_ms(std::optional<double> busy, double gaps_limit, double queue_ms,
                       double loop_ms);

// Production's busy phases on a device: from its return after an idle phase to the next, counting
// the windows in which it was busy.
class BusyPhases {
 public:
  // A window in which production was busy: adds to the phase in progress.
  void busy(uint64_t window_ns);
  // Every production job idle (the policy's idle state begins): the phase in progress ends.
  void end();
  // The same, for a phase that does not tell production's pattern (its start-up): not kept.
  void drop();
  // The median of the last kBusyPhasesKept phases, in seconds; none until one has ended.
  std::optional<double> typical_s() const;

 private:
  std::deque<double> phases_s_;
  uint64_t current_ns_ = 0;
};

// One opportunistic job's launch rate in one state (production idle, or running beside it).
class QueueRate {
 public:
  // One window in this state in which the job launched: its launches per second.
  void record(double kernels_per_s);
  // The bound for the next window in this state: 0 (none) until kQueueRateLeast windows are known
  // or where `queue_ms` is 0.
  uint32_t bound(double queue_ms, uint32_t least) const;

 private:
  std::deque<double> rates_;
};

}  // namespace gpushare::policies
