// What /metrics shows (docs/metrics.md), as plain values: the event loop fills one snapshot per
// tick (metrics_collect.cpp) and hands it to the HTTP thread (metrics_endpoint.h), which only
// formats the latest one (metrics_format.h). Nothing here points into the daemon's live state, so
// a scrape never races the loop and a slow scraper never delays a tick.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare::daemon {

// Why the daemon said no: the `reason` label of gpushare_refusals_total.
enum class Refusal {
  production,    // a registration asked for production and no rule matched
  alloc,         // an allocation over a limit or the capacity
  set_priority,  // gpusharectl set-priority by someone not allowed
  set_limit,     // gpusharectl set-limit by someone not allowed
  policy,        // gpusharectl policy by someone not allowed
  reload,        // gpusharectl reload by someone not allowed
  max_clients,   // a connection beyond max_clients
  count_
};
inline constexpr std::array<std::string_view, static_cast<size_t>(Refusal::count_)> kRefusalNames =
    {"production", "alloc", "set_priority", "set_limit", "policy", "reload", "max_clients"};
static_assert(kRefusalNames.back() == "max_clients", "kRefusalNames follows enum Refusal");

// The daemon's own counters, bumped by the event loop where the event happens.
struct DaemonCounters {
  std::array<uint64_t, static_cast<size_t>(Refusal::count_)> refusals{};
  uint64_t tick_overruns = 0;  // timer expirations the loop missed (it was busy past a tick)
  uint64_t reloads = 0;
  uint64_t failed_reloads = 0;
  void refused(Refusal r) { ++refusals[static_cast<size_t>(r)]; }
};

struct JobMemorySample {
  int device = 0;
  uint64_t used_bytes = 0;              // declared on the device, reservations included
  std::optional<uint64_t> limit_bytes;  // none: no limit
  uint64_t on_host_bytes = 0;           // swapped out (or moving out) to host memory
  uint64_t unmoved_bytes = 0;           // swapped out but for these: the driver refused to move
};

struct JobSample {
  // Labels. `job` is chosen by the client: the formatter escapes it.
  std::string job;
  int64_t pid = 0;
  uint32_t uid = 0;
  std::string job_class;  // granted: production or opportunistic
  int device = 0;         // where it is scheduled
  // Counters from the job's control block (written by the client: they may restart).
  uint64_t launches = 0;
  std::optional<uint64_t> completed_launches;  // production jobs whose shim tracks completions
  uint64_t gate_waits = 0;
  uint64_t gate_held_ns = 0;
  bool paused = false;  // the gate holds every launch now (policy or memory)
  double launches_per_second = 0;
  std::vector<JobMemorySample> memory;  // one per device it holds memory on
  uint64_t swaps_out = 0, swaps_in = 0;
  uint64_t swapped_out_bytes = 0, swapped_in_bytes = 0;
};

struct DeviceSample {
  int device = 0;
  std::string policy;
  // Launches per second the policy allowed the opportunistic jobs in the last window, all of them
  // together: +Inf when unlimited, absent without opportunistic jobs.
  std::optional<double> opportunistic_limit_per_second;
  // The policy's estimate of the slowest production job's rate over its solo rate, where the
  // policy has one (tgs, harvest).
  std::optional<double> production_progress;
  std::optional<uint64_t> capacity_bytes;  // none while unknown
  uint64_t production_bytes = 0, opportunistic_bytes = 0;
};

struct MetricsSnapshot {
  std::string version;
  double uptime_seconds = 0;
  uint64_t clients = 0;
  uint64_t protocol_errors = 0;  // clients dropped for a bad frame or request
  DaemonCounters counters;
  std::vector<DeviceSample> devices;
  std::vector<JobSample> jobs;
};

}  // namespace gpushare::daemon
