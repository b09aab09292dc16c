#include "memory_broker.h"

#include <fnmatch.h>

#include <algorithm>

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
    case SwapState::prefetched:
      return "prefetched";
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
  auto it = job.memory_on.find(device);
  return it == job.memory_on.end() ? 0 : it->second.bytes;
}

namespace {
// The job's swappable bytes on the devices `on` accepts.
template <class OnDevice>
uint64_t swappable_bytes(const Job& job, OnDevice on) {
  uint64_t total = 0;
  for (const auto& [device, d] : job.memory_on)
    if (on(device)) total += d.swappable;
  return total;
}

// Its swappable bytes on the device, given `moved` = job_moved_out (at most its swappable bytes
// there, so nothing underflows). The shim writes the progress at any time: one reading serves
// both the resident and the leaving bytes of a job, so that they always agree. A swap-in counts
// what it will bring (the room is taken when it is asked for).
uint64_t swappable_on_device(const Job& job, int device, uint64_t moved) {
  const JobMemory& m = job.memory_state;
  const uint64_t swappable = job_swappable(job, device);
  const uint64_t part = std::min(m.partly_on_device.value_or(swappable), swappable);
  switch (m.state) {
    case SwapState::swapped_out:  // what its move could not take stays (memory_job.h)
      return m.partly_on_device ? part : 0;
    case SwapState::prefetched:
      return part;
    case SwapState::swapping_in:
      return m.swap_in_bound ? std::min(swappable, part + std::min(*m.swap_in_bound, swappable))
                             : swappable;
    case SwapState::swapping_out:
      return part - std::min(moved, part);
    case SwapState::resident:
      break;
  }
  return swappable;
}

uint64_t resident_with(const Job& job, int device, uint64_t moved) {
  return job_bytes(job, device) - job_swappable(job, device) +
         swappable_on_device(job, device, moved);
}
}  // namespace

uint64_t job_swappable_total(const Job& job) {
  return swappable_bytes(job, [](int) { return true; });
}

uint64_t job_swappable(const Job& job, int device) {
  auto it = job.memory_on.find(device);
  return it == job.memory_on.end() ? 0 : it->second.swappable;
}

uint64_t job_swap_progress(const Job& job) {
  const protocol::ControlBlock* b = job.block.page();
  if (job.memory_state.state != SwapState::swapping_out || !b) return 0;
  // Another request's progress (an old one, or one the daemon never made) says nothing.
  if (b->swap_progress_seq.load(std::memory_order_acquire) != job.memory_state.request_seq)
    return 0;
  uint64_t moved = b->swap_progress_bytes.load(std::memory_order_acquire);
  return std::min(moved, swappable_bytes(job, [](int) { return true; }));
}

uint64_t job_moved_out(const Job& job, int device) {
  uint64_t moved = job_swap_progress(job);
  if (moved == 0) return 0;
  // One count for all devices: this device's share is only what cannot have come from the
  // others, so a job on several devices never frees room on one that its others' moves freed.
  uint64_t here = job_swappable(job, device);
  uint64_t elsewhere = swappable_bytes(job, [device](int d) { return d != device; });
  return std::min(moved > elsewhere ? moved - elsewhere : 0, here);
}

uint64_t job_resident(const Job& job, int device) {
  return resident_with(job, device, job_moved_out(job, device));
}

uint64_t job_swappable_resident(const Job& job, int device) {
  return swappable_on_device(job, device, job_moved_out(job, device));
}

uint64_t job_unmoved(const Job& job, int device) {
  return job.memory_state.state == SwapState::swapped_out ? swappable_on_device(job, device, 0) : 0;
}

uint64_t job_unhonoured(const Job& job, int device) {
  const JobMemory& m = job.memory_state;
  auto it = m.unhonoured.find(device);
  if (it == m.unhonoured.end()) return 0;
  // At most its memory that cannot move to host, which stays on the device in every swap state:
  // resident, evictable and leaving bytes keep their order, so device_use's sums never underflow.
  return std::min(it->second, job_bytes(job, device) - job_swappable(job, device));
}

bool holds_memory_on(const Job& job, int device) {
  return job.memory_on.count(device) > 0;
}

DeviceMemoryUse device_use(Registry& registry, int device) {
  DeviceMemoryUse use;
  for (auto& [id, job] : registry.jobs()) {
    uint64_t moved = job_moved_out(job, device);
    // Declared beyond what its process holds, past the grace period: not counted (memory_audit.h).
    use.resident += resident_with(job, device, moved) - job_unhonoured(job, device);
    bool opportunistic = job.granted == protocol::JobClass::opportunistic;
    SwapState s = job.memory_state.state;
    // What is already on host is neither resident nor leaving: room a waiter may take now.
    if (s == SwapState::swapping_out) use.leaving += swappable_on_device(job, device, moved);
    if (opportunistic &&
        (s == SwapState::resident || s == SwapState::swapping_in || s == SwapState::prefetched))
      use.evictable += swappable_on_device(job, device, moved);
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
