// Recording what gpushare-sim's memory model needs (docs/memory.md, "Traces"): with
// `memory.trace` set, gpushared appends one JSON object per line to that file: the devices'
// capacities, each job's class and memory (total and swappable bytes per device, when they
// change), its swap state when it changes, its launch bursts (a run of ticks in which its launch
// count grew: start, end, launches) and every acknowledged swap (direction, bytes, seconds as its
// shim measured them). `gpushare-sim memory --trace FILE` turns such a file into a case and
// compares its makespan predictions with the one recorded. Times are seconds since the file was
// opened; bursts are as fine as the tick.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "memory_job.h"

namespace gpushare::daemon {

class Registry;
struct MemoryBroker;
struct MemoryConfig;
struct Job;

class MemoryTrace {
 public:
  MemoryTrace() = default;
  ~MemoryTrace();
  MemoryTrace(const MemoryTrace&) = delete;
  MemoryTrace& operator=(const MemoryTrace&) = delete;

  // Follows memory.trace (start and reload): opens, switches or closes the file. A file that
  // cannot be opened is one warning and no recording; the daemon carries on.
  void configure(const std::string& path, std::chrono::milliseconds tick,
                 std::chrono::steady_clock::time_point now);
  bool recording() const { return file_ != nullptr; }

  // Each tick: capacities, jobs that came or left, memory and state changes, bursts.
  void sample(Registry& registry, const MemoryBroker& broker, const MemoryConfig& config,
              std::chrono::steady_clock::time_point now);
  // An acknowledged move of the job's memory: "out", "in" or "prefetch".
  void swap(const Job& job, const char* direction, uint64_t bytes, uint64_t ns,
            std::chrono::steady_clock::time_point now);

 private:
  struct Seen {
    SwapState state = SwapState::resident;
    uint64_t launches = 0;
    std::map<int, std::pair<uint64_t, uint64_t>> memory;  // device -> (bytes, swappable)
    bool in_burst = false;
    double burst_start = 0, burst_end = 0;
    uint64_t burst_launches = 0;
  };
  void write(nlohmann::json event, std::chrono::steady_clock::time_point now);
  void close_burst(uint64_t id, Seen& seen, std::chrono::steady_clock::time_point now);
  double seconds(std::chrono::steady_clock::time_point t) const;

  std::string path_;
  FILE* file_ = nullptr;
  std::chrono::steady_clock::time_point opened_;
  double last_sample_ = 0;  // a burst starts after the sample that saw no launch yet
  std::map<uint64_t, Seen> jobs_;
  std::map<int, uint64_t> capacities_;
};

}  // namespace gpushare::daemon
