// The memory trace (memory_trace.h): one JSON object per line, flushed after each tick's events,
// so that a reader sees whole lines while the daemon runs.
#include "memory_trace.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "memory_broker.h"
#include "registry.h"

namespace gpushare::daemon {

using nlohmann::json;

MemoryTrace::~MemoryTrace() {
  if (file_) std::fclose(file_);
}

double MemoryTrace::seconds(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double>(t - opened_).count();
}

void MemoryTrace::write(json event, std::chrono::steady_clock::time_point now) {
  event["t"] = seconds(now);
  const std::string line = event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    spdlog::warn("memory trace {}: cannot write ({}); not recording any more", path_,
                 std::strerror(errno));
    std::fclose(file_);
    file_ = nullptr;
  }
}

void MemoryTrace::configure(const std::string& path, std::chrono::milliseconds tick,
                            std::chrono::steady_clock::time_point now) {
  if (path == path_) return;
  if (file_) std::fclose(file_), file_ = nullptr;
  path_ = path;
  jobs_.clear();
  capacities_.clear();
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "we");
  if (!file_) {
    spdlog::warn("memory trace {}: cannot open ({}); not recording", path, std::strerror(errno));
    return;
  }
  opened_ = now;
  last_sample_ = 0;
  spdlog::info("memory trace: recording to {}", path);
  write({{"event", "start"}, {"tick_s", std::chrono::duration<double>(tick).count()}}, now);
  std::fflush(file_);
}

void MemoryTrace::close_burst(uint64_t id, Seen& seen, std::chrono::steady_clock::time_point now) {
  if (!seen.in_burst) return;
  seen.in_burst = false;
  write({{"event", "burst"},
         {"id", id},
         {"start", seen.burst_start},
         {"end", seen.burst_end},
         {"launches", seen.burst_launches}},
        now);
}

void MemoryTrace::sample(Registry& registry, const MemoryBroker& broker, const MemoryConfig& config,
                         std::chrono::steady_clock::time_point now) {
  if (!file_) return;
  std::set<int> devices;
  for (const auto& [device, bytes] : broker.physical) devices.insert(device);
  for (auto& [id, job] : registry.jobs())
    for (const auto& [device, memory] : job.memory_on) devices.insert(device);
  for (int d : devices) {
    std::optional<uint64_t> capacity = broker.capacity(config, d);
    if (!capacity || capacities_[d] == *capacity) continue;
    capacities_[d] = *capacity;
    write({{"event", "device"}, {"device", d}, {"capacity_bytes", *capacity}}, now);
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (registry.find(it->first)) {
      ++it;
      continue;
    }
    close_burst(it->first, it->second, now);
    write({{"event", "leave"}, {"id", it->first}}, now);
    it = jobs_.erase(it);
  }
  for (auto& [id, job] : registry.jobs()) {
    auto [at, added] = jobs_.try_emplace(id);
    Seen& seen = at->second;
    const uint64_t launches = job.block.launches();
    if (added) {
      write({{"event", "job"},
             {"id", id},
             {"job", job.name},
             {"class",
              job.granted == protocol::JobClass::production ? "production" : "opportunistic"}},
            now);
      seen.launches = launches;
    }
    std::map<int, uint64_t> by_device = job.memory_by_device();
    for (const auto& [device, held] : seen.memory) by_device.try_emplace(device, 0);  // all freed
    for (const auto& [device, bytes] : by_device) {
      const std::pair<uint64_t, uint64_t> now_held{bytes, job_swappable(job, device)};
      auto& held = seen.memory[device];
      if (held == now_held) continue;
      held = now_held;
      write({{"event", "memory"},
             {"id", id},
             {"device", device},
             {"bytes", now_held.first},
             {"swappable_bytes", now_held.second}},
            now);
    }
    if (added || seen.state != job.memory_state.state) {
      seen.state = job.memory_state.state;
      write({{"event", "state"}, {"id", id}, {"state", swap_state_name(seen.state)}}, now);
    }
    // A burst: the ticks in which its launch count grew; the first tick without ends it.
    if (launches > seen.launches) {
      if (!seen.in_burst) {
        seen.in_burst = true;
        seen.burst_start = last_sample_;
        seen.burst_launches = 0;
      }
      seen.burst_end = seconds(now);
      seen.burst_launches += launches - seen.launches;
    } else {
      close_burst(id, seen, now);
    }
    seen.launches = launches;
  }
  last_sample_ = seconds(now);
  if (file_) std::fflush(file_);
}

void MemoryTrace::swap(const Job& job, const char* direction, uint64_t bytes, uint64_t ns,
                       std::chrono::steady_clock::time_point now) {
  if (!file_) return;
  write({{"event", "swap"},
         {"id", job.id},
         {"direction", direction},
         {"bytes", bytes},
         {"seconds", static_cast<double>(ns) / 1e9}},
        now);
}

}  // namespace gpushare::daemon
