// A recorded daemon trace (gpushared's memory.trace, daemon/memory_trace.h) as a memory case
// (memory_model.h), so that `gpushare-sim memory --trace FILE` predicts the makespans of the
// schedules and compares them with the one measured. Pure: the recording is already parsed
// (memory_trace_file.h reads the file).
//
// From one device's recording: each opportunistic job with launch bursts and swappable memory
// becomes a job whose steps are its bursts (compute: a burst's mean length, at least a tick; idle:
// the mean gap between its bursts less the time it was paused for memory in that gap), whose
// working set is the most swappable memory it held; production's memory and every job's
// non-swappable memory are the production bytes; the host <-> device rates are the acknowledged
// swaps' bytes over their seconds. The measured makespan runs from the first opportunistic burst's
// start to the last one's end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memory_model.h"

namespace gpushare::sim {

using Interval = std::pair<double, double>;  // [start, end) in seconds of the recording

struct RecordedJob {
  uint64_t id = 0;
  std::string name;
  bool production = false;
  uint64_t bytes = 0;      // the most it held on the device, all kinds
  uint64_t swappable = 0;  // the most swappable memory it held there
  std::vector<Interval> bursts;
  std::vector<Interval> paused;  // not resident: swapping, on host, prefetched
};

struct RecordedSwap {
  bool to_device = false;
  uint64_t bytes = 0;
  double seconds = 0;
};

struct Recording {
  double tick_s = 0;
  std::optional<uint64_t> capacity_bytes;
  std::vector<RecordedJob> jobs;  // in registration order
  std::vector<RecordedSwap> swaps;
};

struct Replay {
  MemoryCase memory_case;
  double measured_makespan_s = 0;
};

// Fills `replay`; returns what the recording lacks (no capacity, no job with bursts, no measured
// swap to the device), or an empty string.
std::string replay_case(const Recording& recording, Replay& replay);

}  // namespace gpushare::sim
