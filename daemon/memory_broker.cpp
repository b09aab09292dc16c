#include "memory_broker.h"

#include <fnmatch.h>

#include "gpushare/protocol/wire.h"
#include "registry.h"

namespace gpushare::daemon {

using protocol::MemDeclareFlags;

const char* swap_state_name(SwapState s) {
  switch (s) {
    case SwapState::resident:
      return "resident";
    case SwapState::swapping_out:
      return "swapping-out";
    case SwapState::swapped_out:
      return "swapped-out";
    case SwapState::swapping_in:
      return "swapping-in";
  }
  return "?";
}

std::optional<uint64_t> MemoryBroker::capacity(const MemoryConfig& config, int device) const {
  auto it = physical.find(device);
  uint64_t size = it == physical.end() ? 0 : it->second;
  if (auto d = config.devices.find(device); d != config.devices.end())
    return d->second.resolve(size);
  if (config.capacity) return config.capacity->resolve(size);
  if (size == 0) return std::nullopt;
  return size > config.reserve_bytes ? size - config.reserve_bytes : 0;
}

uint64_t job_bytes(const Job& job, int device) {
  uint64_t total = 0;
  for (const auto& [key, a] : job.memory)
    if (key.first == device) total += a.bytes;
  return total;
}

uint64_t job_swappable(const Job& job, int device) {
  uint64_t total = 0;
  for (const auto& [key, a] : job.memory)
    if (key.first == device && (a.flags & static_cast<uint32_t>(MemDeclareFlags::swappable)))
      total += a.bytes;
  return total;
}

uint64_t job_resident(const Job& job, int device) {
  uint64_t all = job_bytes(job, device);
  return job.memory_state.state == SwapState::swapped_out ? all - job_swappable(job, device) : all;
}

bool holds_memory_on(const Job& job, int device) {
  for (const auto& [key, a] : job.memory)
    if (key.first == device) return true;
  return false;
}

DeviceMemoryUse device_use(Registry& registry, int device) {
  DeviceMemoryUse use;
  for (auto& [id, job] : registry.jobs()) {
    use.resident += job_resident(job, device);
    bool opportunistic = job.granted == protocol::JobClass::opportunistic;
    SwapState s = job.memory_state.state;
    if (s == SwapState::swapping_out) use.leaving += job_swappable(job, device);
    if (opportunistic && (s == SwapState::resident || s == SwapState::swapping_in))
      use.evictable += job_swappable(job, device);
  }
  return use;
}

std::optional<uint64_t> job_limit(const MemoryConfig& config, const Job& job) {
  if (job.memory_state.limit_override) return *job.memory_state.limit_override;
  for (const MemoryLimitRule& rule : config.limits)
    if (fnmatch(rule.job.c_str(), job.name.c_str(), 0) == 0) return rule.bytes;
  return std::nullopt;
}

}  // namespace gpushare::daemon
