// Whether a production job has work on the GPU right now, for kernel-level idle gating
// (Gate::production_idle_only; docs/protocol.md "Kernel-level idle gating").
//
// The daemon's idle relay samples every production job's control block every ~250 µs and asks
// this function. A job is busy when
//   - it launched since the previous sample, or
//   - a completion mark it recorded is not yet seen complete (completed < last mark), or
//   - it launched within the last `quiet_ns` and its latest launches are not covered by a mark yet
//     (the launch is counted before its mark is recorded; a stride above 1 leaves a tail unmarked).
// A job whose counters have not moved for `stale_ns` is idle whatever its marks say: a shim that
// stopped polling (stopped, killed, hung) must not hold opportunistic work forever.
// Everything read here comes from client memory: values are only compared with earlier samples.
#pragma once

#include <cstdint>
#include <optional>

namespace gpushare::daemon {

struct ProductionSignals {
  uint64_t launches = 0;
  std::optional<uint64_t> completed;  // the shim's latest completed mark, when it tracks them
  uint64_t last_mark = 0;             // the shim's latest recorded mark
};

struct ActivityTimes {
  uint64_t quiet_ns = 2'000'000;
  uint64_t stale_ns = 1'000'000'000;
};

class ProductionActivity {
 public:
  // Takes the sample at `now_ns` (monotonic) and says whether the job is busy.
  bool busy(const ProductionSignals& s, uint64_t now_ns, const ActivityTimes& times = {});

 private:
  bool first_ = true;
  uint64_t launches_ = 0;
  std::optional<uint64_t> completed_;
  uint64_t last_launch_ns_ = 0;  // when launches last moved
  uint64_t last_change_ns_ = 0;  // when launches or completed last moved
};

}  // namespace gpushare::daemon
