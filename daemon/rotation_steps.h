// Rotating residency, the daemon's side (docs/memory.md, "Rotating residency"): what to ask of
// the jobs' shims now so that a device reaches what policies::decide_rotation wants, one move at
// a time. Pure: the numbers in, the steps out; daemon/memory_rotation.cpp gathers the numbers and
// carries the steps out.
//
// The rules, in order:
// - nothing while a job of the device moves (a swap-in or a swap-out not acknowledged yet): the
//   device never holds more than the capacity, and a switch is a sequence, not a race. A move
//   overdue (unacknowledged past memory.swap_timeout_ms: a hung or stopped process) no longer
//   holds the others; its bytes still count where the books put them, and it is not asked again;
// - the decision's swap-outs first, all at once (the current job leaving is the switch), and the
//   next job too when it holds more than its prefetch (a job moves whole: with two jobs taking
//   turns, the one whose turn ended is the next one); nothing comes in before they are on host;
// - then the resident set, in the decision's order: a job all on the device resumes, the first one
//   still (partly) on host comes in, its rest only, when it fits and no production allocation
//   waits;
// - once every job of the resident set is on the device, the prefetch: the next job's
//   `prefetch_bytes` come in while the resident set computes (bounded: it stays paused).
#pragma once

#include <cstdint>
#include <vector>

#include "gpushare/policies/rotation.h"
#include "memory_job.h"

namespace gpushare::daemon {

// An opportunistic job of the device, as the steps see it.
struct RotatingJob {
  uint64_t job_id = 0;
  SwapState state = SwapState::resident;
  uint64_t swappable = 0;  // its swappable bytes on the device
  uint64_t on_device = 0;  // of them on the device now (a swap-in: with what it brings)
  bool overdue = false;    // moving, unacknowledged for longer than the swap timeout
};

struct RotationRoom {
  uint64_t capacity = 0;
  uint64_t resident = 0;          // all the device holds now (daemon/memory_broker.h, device_use)
  bool production_waits = false;  // a production allocation waits for room on the device
};

enum class RotationStepKind {
  swap_out,  // to host, paused
  swap_in,   // the rest of it to the device; it runs once there
  prefetch,  // `bytes` of it to the device; it stays paused
  resume,    // all of it is on the device already: it runs
};

struct RotationStep {
  RotationStepKind kind = RotationStepKind::resume;
  uint64_t job_id = 0;
  uint64_t bytes = 0;  // swap_in, prefetch: how many bytes come in; swap_out: how many leave
};

std::vector<RotationStep> rotation_steps(const policies::RotationDecision& decision,
                                         const std::vector<RotatingJob>& jobs,
                                         const RotationRoom& room);

}  // namespace gpushare::daemon
