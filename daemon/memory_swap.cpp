// Moving opportunistic jobs' memory between device and host (docs/memory.md): the requests
// written into the control blocks, their acknowledgements, the production allocations waiting
// for them, the order of swap-in (policies/swap_order.h), and the jobs' views of memory.
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <set>

#include "gpushare/policies/swap_order.h"
#include "gpushare/protocol/futex.h"
#include "logging.h"
#include "memory_service.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;
using protocol::kPausedForMemory;

// The reward window of the thesis: the share of ticks with launches, averaged over about this
// long (an exponentially weighted average, so no per-tick history is kept).
constexpr double kRewardWindowSeconds = 5.0;
// Until a job's own swap was measured: PCIe 4.0 x16's usable host<->device rate, about 25 GB/s
// (it only scales every penalty alike, so it cannot change the order between unmeasured jobs).
constexpr double kDefaultBytesPerSecond = 25e9;

void wake(std::atomic<uint32_t>& word) { protocol::futex_wake_all(&word); }

void set_memory_pause(protocol::ControlBlock* b, bool paused) {
  if (paused)
    b->paused.fetch_or(kPausedForMemory, std::memory_order_acq_rel);
  else
    b->paused.fetch_and(~kPausedForMemory, std::memory_order_acq_rel);
  b->gate_seq.fetch_add(1, std::memory_order_acq_rel);
  wake(b->gate_seq);
}

// Streaming swap-out (docs/memory.md): a waiter admitted on the room the victims have already
// moved, while the rest of their memory is still leaving.
void log_admitted_during_swap_out(Registry& registry, const Job& job, const PendingAdmission& p) {
  for (auto& [id, victim] : registry.jobs())
    if (victim.memory_state.state == SwapState::swapping_out && holds_memory_on(victim, p.device))
      spdlog::info(
          "alloc pid={} job={} device={} bytes={} admitted while job={} id={} swaps out: {} of "
          "{} bytes moved so far",
          job.peer.pid, log_text(job.name), p.device, p.bytes, log_text(victim.name), victim.id,
          job_moved_out(victim, p.device), job_swappable(victim, p.device));
}

std::set<int> devices_of(const Job& job) {
  std::set<int> devices(job.devices.begin(), job.devices.end());
  for (const auto& [device, d] : job.memory_on) devices.insert(device);
  return devices;
}

}  // namespace

double swap_in_seconds(const Job& job, int device) {
  double rate = job.memory_state.bytes_per_second > 0 ? job.memory_state.bytes_per_second
                                                      : kDefaultBytesPerSecond;
  return static_cast<double>(job_swappable(job, device)) / rate;
}

void request_residency(Job& job, bool to_host, Clock::time_point now,
                       std::optional<uint64_t> bound) {
  protocol::ControlBlock* b = job.block.page();
  if (!b) return;
  JobMemory& m = job.memory_state;
  // Pause first, so the job is held at a launch boundary before its memory starts to move.
  if (to_host) set_memory_pause(b, true);
  // What is on the device when only part of it is (memory_job.h): a swap-out leaves from there,
  // a bounded swap-in adds to it; a whole swap-in, or a swap-out of all of it, needs no count.
  if (to_host && m.state == SwapState::swapping_in && m.swap_in_bound)
    m.partly_on_device = m.partly_on_device.value_or(0) + *m.swap_in_bound;
  else if (to_host && m.state != SwapState::prefetched)
    m.partly_on_device.reset();
  else if (!to_host && bound)
    m.partly_on_device = m.partly_on_device.value_or(0);
  m.swap_in_bound = to_host ? std::nullopt : bound;
  m.state = to_host ? SwapState::swapping_out : SwapState::swapping_in;
  m.requested = now;
  m.request_seq = b->memory_request_seq.load(std::memory_order_relaxed) + 1;
  b->memory_target.store(
      static_cast<uint32_t>(to_host ? protocol::Residency::host : protocol::Residency::device),
      std::memory_order_release);
  b->memory_target_bytes.store(to_host ? 0 : bound.value_or(0), std::memory_order_release);
  b->memory_request_seq.store(m.request_seq, std::memory_order_release);
  wake(b->memory_request_seq);
}

void resume_prefetched(Job& job) {
  JobMemory& m = job.memory_state;
  m.state = SwapState::resident;
  m.partly_on_device.reset();
  ++m.swaps_in;  // its swap-in was the prefetch: done, in one bounded piece
  if (protocol::ControlBlock* b = job.block.page()) set_memory_pause(b, false);
}

void publish_views(Registry& registry, const MemoryBroker& broker, const MemoryConfig& config) {
  std::set<int> devices;
  for (const auto& [device, bytes] : broker.physical) devices.insert(device);
  for (auto& [id, job] : registry.jobs())
    for (int d : devices_of(job)) devices.insert(d);
  std::map<int, DeviceMemoryUse> use;
  for (int d : devices) use[d] = device_use(registry, d);
  for (auto& [id, job] : registry.jobs()) {
    protocol::ControlBlock* b = job.block.page();
    if (!b) continue;
    b->swappable_memory.store(config.oversubscribe && job.granted == JobClass::opportunistic,
                              std::memory_order_relaxed);
    b->capture_patience_ms.store(static_cast<uint32_t>(config.swap_timeout.count() / 2),
                                 std::memory_order_relaxed);
    std::optional<uint64_t> limit = job_limit(config, job);
    size_t slot = 0;
    for (int d : devices) {
      if (slot == protocol::kMemoryViews) break;
      std::optional<uint64_t> capacity = broker.capacity(config, d);
      if (!capacity && !limit) continue;
      uint64_t own = job_bytes(job, d);
      uint64_t total = std::min(limit.value_or(UINT64_MAX), capacity.value_or(UINT64_MAX));
      uint64_t free = limit ? (*limit > own ? *limit - own : 0) : UINT64_MAX;
      if (capacity) {
        const DeviceMemoryUse& u = use[d];
        // Production may take what opportunistic jobs hold; opportunistic jobs what is left.
        uint64_t held =
            job.granted == JobClass::production ? u.resident - u.evictable - u.leaving : u.resident;
        free = std::min(free, *capacity > held ? *capacity - held : 0);
      }
      auto& view = b->memory_views[slot++];
      view.device.store(d, std::memory_order_relaxed);
      view.free_bytes.store(std::min(free, total), std::memory_order_relaxed);
      view.total_bytes.store(total, std::memory_order_release);
    }
    for (; slot < protocol::kMemoryViews; ++slot)
      b->memory_views[slot].total_bytes.store(0, std::memory_order_release);
  }
}

void MemoryService::serve_waiters(Clock::time_point now) {
  std::set<int> blocked;  // devices whose first waiter must still wait: the rest wait behind it
  for (auto it = broker_.pending.begin(); it != broker_.pending.end();) {
    PendingAdmission p = *it;
    Job* job = parts_.registry.find(p.job_id);
    if (!job || job->connection != p.fd) {
      it = broker_.pending.erase(it);  // the job went away while it waited
      continue;
    }
    if (blocked.count(p.device)) {
      ++it;
      continue;
    }
    std::optional<uint64_t> capacity = broker_.capacity(parts_.config.memory, p.device);
    const DeviceMemoryUse use = device_use(parts_.registry, p.device);
    bool fits = !capacity || use.resident + p.bytes <= *capacity;
    // Where no move to host is under way that could still make the room, more opportunistic
    // memory is asked to move; where none is left to ask (what the driver refused to move stays
    // on the device), waiting cannot help: the allocation goes through now, not at the timeout.
    bool stuck = false;
    if (!fits && now < p.deadline && use.leaving == 0) {
      const policies::Admission more =
          policies::decide_admission({.job_class = JobClass::production, .bytes = p.bytes},
                                     policies::DeviceMemory{.capacity = *capacity,
                                                            .resident = use.resident,
                                                            .evictable = use.evictable,
                                                            .leaving = 0,
                                                            .waiting = 0},
                                     movable_jobs(p.device));
      swap_out(more.swap_out, *job, p.device, now);
      stuck = more.swap_out.empty();
    }
    if (!fits && now < p.deadline && !stuck) {
      blocked.insert(p.device);
      ++it;
      continue;
    }
    if (stuck)
      spdlog::warn(
          "alloc pid={} job={} device={} bytes={}: no more opportunistic memory can move to "
          "host (what the driver refused to move stays on the device); let through, the driver "
          "decides",
          job->peer.pid, log_text(job->name), p.device, p.bytes);
    else if (!fits)
      spdlog::warn(
          "alloc pid={} job={} device={} bytes={}: opportunistic memory did not move to "
          "host within {} ms; let through, the driver decides",
          job->peer.pid, log_text(job->name), p.device, p.bytes,
          parts_.config.memory.swap_timeout.count());
    else
      log_admitted_during_swap_out(parts_.registry, *job, p);
    it = broker_.pending.erase(it);
    job->set_allocation({p.device, p.handle},
                        DeclaredAllocation{p.bytes, p.kind, p.flags, p.site, now, false});
    publish_views(parts_.registry, broker_, parts_.config.memory);
    answer(p.job_id, p.fd, true);
  }
}

void MemoryService::tick(Clock::time_point now) {
  trace_.configure(parts_.config.memory.trace_path, parts_.config.tick, now);
  double alpha = std::min(
      1.0, std::chrono::duration<double>(parts_.config.tick).count() / kRewardWindowSeconds);
  for (auto& [id, job] : parts_.registry.jobs()) {
    protocol::ControlBlock* b = job.block.page();
    if (!b) continue;
    JobMemory& m = job.memory_state;
    uint64_t launches = job.block.launches();
    if (m.state == SwapState::resident) {  // frozen while paused for memory
      m.reward = (1 - alpha) * m.reward + alpha * (launches != m.launches_seen ? 1.0 : 0.0);
    }
    m.launches_seen = launches;
    bool moving = m.state == SwapState::swapping_out || m.state == SwapState::swapping_in;
    if (!moving || b->memory_done_seq.load(std::memory_order_acquire) != m.request_seq) continue;
    uint64_t bytes = b->swap_bytes.load(std::memory_order_relaxed);
    uint64_t ns = b->swap_ns.load(std::memory_order_relaxed);
    if (bytes > 0 && ns > 0) m.bytes_per_second = static_cast<double>(bytes) * 1e9 / ns;
    bool out = m.state == SwapState::swapping_out;
    // A bounded swap-in (rotation's prefetch) leaves the job paused, the rest of it on host.
    bool prefetch = !out && m.swap_in_bound;
    (out ? m.swapped_out_bytes : m.swapped_in_bytes) += bytes;
    const char* event = out ? "swapped-out" : prefetch ? "prefetched" : "swapped-in";
    if (out) {
      m.state = SwapState::swapped_out;
      // What the driver refused to move stays on the device, and its room is not production's
      // (untrusted, like every count a shim writes: at most the job's swappable memory).
      const uint64_t unmoved =
          std::min(b->swap_unmoved_bytes.load(std::memory_order_relaxed), job_swappable_total(job));
      if (unmoved > 0)
        m.partly_on_device = unmoved;
      else
        m.partly_on_device.reset();
      ++m.swaps_out;
      if (unmoved > 0)
        spdlog::warn(
            "swap-out pid={} job={} id={}: the driver refused to move {} bytes (the job's log "
            "says why); they stay on the device and are not room for production",
            job.peer.pid, log_text(job.name), job.id, unmoved);
    } else if (prefetch) {
      m.state = SwapState::prefetched;
      // Untrusted, like every count a shim writes: never more than the daemon asked for.
      m.partly_on_device = m.partly_on_device.value_or(0) + std::min(bytes, *m.swap_in_bound);
      m.swap_in_bound.reset();
    } else {
      m.state = SwapState::resident;
      m.partly_on_device.reset();
      ++m.swaps_in;
      set_memory_pause(b, false);
    }
    spdlog::info("{} pid={} job={} id={} bytes={} in {:.1f} ms", event, job.peer.pid,
                 log_text(job.name), job.id, bytes, ns / 1e6);
    trace_.swap(job, out ? "out" : prefetch ? "prefetch" : "in", bytes, ns, now);
  }
  serve_waiters(now);
  // With rotation configured, its steps bring jobs back (memory_rotation.cpp); else room does.
  if (parts_.config.memory.rotation.enabled)
    rotate_memory(now);
  else
    swap_in_when_room(now);
  // Views also follow limits, reloads and departed jobs: published every tick.
  publish_views(parts_.registry, broker_, parts_.config.memory);
  trace_.sample(parts_.registry, broker_, parts_.config.memory, now);
  // memory_admission.cpp: reservations never used (once a second), and NVML's latest reading.
  if (now - last_expiry_check_ >= std::chrono::seconds(1)) {
    last_expiry_check_ = now;
    expire_reservations(now);
  }
  check_declarations(now);
}

void MemoryService::swap_in_when_room(Clock::time_point now) {
  // Swap-in: one transfer per device at a time, in the thesis's order, while nobody waits for
  // room; the next one starts as soon as the previous job resumes, so it overlaps that job's
  // compute. A job left prefetched by a rotation that a reload turned off comes back the same way.
  broker_.rotation.clear();
  auto waits_on_host = [](SwapState s) {
    return s == SwapState::swapped_out || s == SwapState::prefetched;
  };
  std::set<int> devices;
  for (auto& [id, job] : parts_.registry.jobs())
    if (waits_on_host(job.memory_state.state))
      for (int d : devices_of(job)) devices.insert(d);
  for (int d : devices) {
    bool busy = std::any_of(broker_.pending.begin(), broker_.pending.end(),
                            [d](const PendingAdmission& p) { return p.device == d; });
    std::vector<policies::SwapCandidate> candidates;
    for (auto& [id, job] : parts_.registry.jobs()) {
      if (!holds_memory_on(job, d)) continue;
      SwapState s = job.memory_state.state;
      if (s == SwapState::swapping_in || s == SwapState::swapping_out) busy = true;
      if (!waits_on_host(s)) continue;
      candidates.push_back({id, job.memory_state.reward, swap_in_seconds(job, d)});
    }
    if (busy || candidates.empty()) continue;
    uint64_t resident = device_use(parts_.registry, d).resident;
    for (uint64_t id : policies::swap_in_order(candidates)) {
      Job& job = *parts_.registry.find(id);
      // A job with memory on several devices comes back only when it fits on each of them.
      bool fits = true;
      for (int other : devices_of(job)) {
        std::optional<uint64_t> cap = broker_.capacity(parts_.config.memory, other);
        uint64_t on = other == d ? resident : device_use(parts_.registry, other).resident;
        uint64_t rest = job_swappable(job, other) - job_swappable_resident(job, other);
        if (cap && on + rest > *cap) fits = false;
      }
      if (!fits) continue;  // a later, smaller job may fit: room is not left idle
      spdlog::info("swap-in job={} id={} device={} bytes={} (reward {:.2f})", log_text(job.name),
                   id, d, job_swappable(job, d) - job_swappable_resident(job, d),
                   job.memory_state.reward);
      request_residency(job, /*to_host=*/false, now);
      break;
    }
  }
}

}  // namespace gpushare::daemon
