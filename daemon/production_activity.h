// Whether a production job has work on the GPU right now, for kernel-level idle gating
// (Gate::production_idle_only; docs/protocol.md "Kernel-level idle gating") and for the busy time
// the policies measure (JobCounters::in_flight_ns).
//
// The daemon's idle relay samples every production job's control block every ~250 µs and asks
// this function. A job is busy when
//   - it launched since the previous sample, or
//   - a completion mark it recorded is not yet seen complete (completed < last mark), or
//   - it launched within the last quiet time and its latest launches are not covered by a mark yet
//     (the launch is counted before its mark is recorded; a stride above 1 leaves a tail unmarked).
// A job whose counters have not moved for `stale_ns` is idle whatever its marks say: a shim that
// stopped polling (stopped, killed, hung) must not hold opportunistic work forever.
//
// The quiet time that holds idle-gated work follows how far the GPU runs behind the job's
// launches: the time from a mark's first sample to the sample that sees it complete (its lag, as
// seen), the longest of the last kLagsKept, plus one sample period, within [least_quiet_ns,
// quiet_ns]; quiet_ns until kLagsKept lags are seen. An unmarked tail is a few kernels launched
// after the last mark, so it is done about as long after its launch as the marks before it were.
// Not always: a burst that ends in a kernel longer than its marks' lags (one long kernel after
// the last mark) releases gated work while that kernel runs, and the gated jobs' in-flight bound
// (Gate::max_in_flight) limits what then runs beside it.
// A fixed quiet_ns (2 ms, until 2026-11-28) held gated work up to 2 ms after each request of a
// launch-bound server whose GPU kept up with it: on the H100 (S2's transformer server at loads 0.3
// and 0.5, 2026-11-28 calls 89-91) its lags were seen at 0-500 µs, gated windows let the
// opportunistic job launch a fifth to a quarter more in two calls of three (as many in the
// third) for no cost the budget could read in gated, and its harvest over 8 repetitions rose
// from 0.37 and 0.27 of MPS client priority's to 0.51 and 0.32.
//
// The busy time the policies measure (in_flight) keeps the fixed quiet_ns. The learnt one is an
// upper bound that is tighter where the GPU keeps up: production slowed by a neighbour runs
// behind, so it is read longer exactly where a mode costs, and a mode's cost read in busy time
// grows. In call 89 the resnet50 server's readings of beside went from -0.29-0.11 to 0.04-0.34 ±
// 0.05-0.13 with it, and the harvest beside it from 0.54 and 0.71 of the isolated opportunistic
// job's speed to 0.34 and 0.18, while the costs the budget was tuned on were read with the fixed
// time.
//
// Everything read here comes from client memory: values are only compared with earlier samples.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace gpushare::daemon {

struct ProductionSignals {
  uint64_t launches = 0;
  std::optional<uint64_t> completed;  // the shim's latest completed mark, when it tracks them
  uint64_t last_mark = 0;             // the shim's latest recorded mark
};

struct ActivityTimes {
  uint64_t quiet_ns = 2'000'000;      // the longest an unmarked tail is taken to run
  uint64_t least_quiet_ns = 500'000;  // the shortest, however soon marks complete
  uint64_t sample_ns = 250'000;       // the relay's period (kIdleRelayPeriod): a lag is seen
                                      // up to one late
  uint64_t stale_ns = 1'000'000'000;
};

class ProductionActivity {
 public:
  static constexpr size_t kLagsKept = 16;

  // Takes the sample at `now_ns` (monotonic) and says whether the job is busy: whether idle-gated
  // work is held (an unmarked tail within the learnt quiet time).
  bool busy(const ProductionSignals& s, uint64_t now_ns, const ActivityTimes& times = {});
  // Whether the last sample counts as the job's busy time for the policies (an unmarked tail
  // within the fixed quiet_ns).
  bool in_flight() const { return in_flight_; }
  // How long after its last launch an unmarked tail counts as busy (see the header comment).
  uint64_t quiet_ns(const ActivityTimes& times = {}) const;

 private:
  void follow_marks(const ProductionSignals& s, uint64_t now_ns, const ActivityTimes& times);
  void keep_lag(uint64_t lag_ns);

  bool first_ = true;
  bool in_flight_ = false;
  uint64_t launches_ = 0;
  std::optional<uint64_t> completed_;
  uint64_t last_mark_ = 0;
  uint64_t last_launch_ns_ = 0;  // when launches last moved
  uint64_t last_change_ns_ = 0;  // when launches or completed last moved
  // The mark whose lag is being timed (one at a time) and the sample that first saw it.
  std::optional<uint64_t> timed_mark_;
  uint64_t timed_since_ns_ = 0;
  std::array<uint64_t, kLagsKept> lags_{};
  size_t lags_seen_ = 0;
};

}  // namespace gpushare::daemon
