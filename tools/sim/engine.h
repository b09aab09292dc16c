// A discrete-event model of one GPU with one engine, shared by the jobs of a trace under a policy.
//
// Kernels of different jobs never overlap (a GPU without MPS); the engine serves the jobs with
// queued kernels in turn. Each job's launches pass through a gate that behaves like the shim's:
// the launch counter is bumped before the check, a launch waits while the job is paused, while its
// number exceeds the allowance, or while the job has max_in_flight kernels queued. Every tick the
// policy sees what the daemon would sample and sets the gates for the next window.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "gpushare/policies/policy.h"
#include "trace.h"

namespace gpushare::sim {

struct JobResult {
  uint64_t kernels = 0;            // kernels completed
  uint64_t kernels_while_on = 0;   // ... while some production job was scheduled on
  uint64_t kernels_while_off = 0;  // ... while none was
  uint64_t iterations = 0;
  uint64_t gate_waits = 0;
};

// Replays `trace` under `policy`, or only the jobs flagged in `included` (the others never start),
// and returns one result per job of the trace. With `timeline`, writes one CSV line per tick and
// job: label, time in s, job name, GPU share in that window.
std::vector<JobResult> simulate(const Trace& trace, policies::Policy& policy,
                                const std::vector<bool>& included, std::ostream* timeline = nullptr,
                                const std::string& label = {});

// Whether any production job of the trace is scheduled on at `t`.
bool production_scheduled(const Trace& trace, uint64_t t);

}  // namespace gpushare::sim
