// What the cudart, linked and dlsym clients do once they hold the driver's entry points: every
// hooked CUDA symbol, a known number of times, so that a test can assert the shim's exact counts.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "driver_api.h"

namespace CLI {
class App;
}

namespace gpushare::clients {

struct ExerciseOptions {
  int launches = 3;         // calls of each kernel-launch entry point and of cuGraphLaunch
  int graph_nodes = 2;      // kernel nodes in the launched graph
  int alloc_rounds = 2;     // rounds of one allocation per path; all but the last are freed
  int info_calls = 2;       // calls of cuMemGetInfo_v2 and cuDeviceTotalMem_v2
  int alloc_device = 0;     // device that the allocations go to
  unsigned kernel_us = 0;   // duration of each kernel (the fake's spin_<us> kernels)
  bool per_thread = false;  // --ptds: per-thread default stream entry points
};
void add_exercise_options(CLI::App& app, ExerciseOptions& options);

// Sizes of one allocation round, by path (bytes accounted on the device).
inline constexpr uint64_t kAllocBytes = 1 << 20;
inline constexpr size_t kPitchWidth = 1000, kPitchHeight = 10;  // pitch rounds to 1024
inline constexpr uint64_t kManagedBytes = 3 << 20;
inline constexpr uint64_t kAsyncBytes = 4 << 20;
inline constexpr uint64_t kPoolBytes = 5 << 20;
inline constexpr uint64_t kCreateBytes = 2 << 20;     // one VMM granule
inline constexpr uint64_t kPeakExtraBytes = 8 << 20;  // allocated and freed after the last round

// Runs the exercise. Besides the rounds above it makes one failing launch (a grid of 0 blocks),
// one failing cuMemAlloc (0 bytes) and one cuMemFree(0). Returns its own tally as JSON: "calls"
// (successful calls by DriverApi field), "failed" (deliberately failing calls by field), "resolved"
// (symbol and object of each hooked pointer), "live_bytes", "peak_bytes", "data_ok", and "error"
// when something unexpected failed.
nlohmann::json run_exercise(const DriverApi& api, const ExerciseOptions& options);

// Prints one JSON line on stdout; returns the exit code (1 when the JSON has "error").
int print_result(const nlohmann::json& result);
}  // namespace gpushare::clients
