// `gpusharectl record`: a timeline of what the daemon did, as Chrome/Perfetto trace-event JSON
// (open it in ui.perfetto.dev or chrome://tracing; docs/metrics.md).
//
// The ctl polls `jobs` and `status` once a daemon tick and keeps each answer (a Sample);
// build_trace() turns the sequence into events, a pure function a test drives with made-up
// samples. Each job is one process track: counters for its launch rate and its memory (on the
// device and on host), slices for its gate state (running, paused) and its memory's place
// (swapping out, on host, swapping in), instants for allocations, frees and class changes. The
// daemon is one more track with each device's policy as slices and policy changes as instants.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace gpushare::ctl {

struct Sample {
  double seconds = 0;      // since recording began
  nlohmann::json jobs;     // the "jobs" array of the daemon's `jobs` reply
  nlohmann::json devices;  // the "devices" array of its `status` reply
};

// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
nlohmann::json build_trace(const std::vector<Sample>& samples);

}  // namespace gpushare::ctl
