// The memory broker's state and its sums over the registry (docs/memory.md): what each device
// holds, what each job may take, and the production allocations that wait while opportunistic
// jobs move their memory to host. The memory service (memory_service.h) owns and drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "memory_config.h"

namespace gpushare::daemon {

struct Job;
class Registry;

// A production allocation admitted in principle, waiting for room (its reply is deferred; the
// shim waits for it, see shim/daemon_link.cpp).
struct PendingAdmission {
  uint64_t job_id = 0;
  int fd = -1;
  int device = 0;
  uint64_t handle = 0;  // the reservation token
  uint64_t bytes = 0;
  uint32_t kind = 0, flags = 0, site = 0;
  std::chrono::steady_clock::time_point deadline;
};

struct DeviceMemoryUse {
  // Bytes on the device: reservations and jobs swapping in included, jobs swapping out less what
  // their shims report moved (job_moved_out).
  uint64_t resident = 0;
  uint64_t evictable = 0;  // swappable bytes of opportunistic jobs whose memory is on the device
  uint64_t leaving = 0;    // swappable bytes of jobs swapping out now, not yet moved
};

// Rotating residency on one device (daemon/memory_rotation.cpp): whose turn it is and since when
// it runs, and the last decision (the cycle the next decision continues, and what status shows).
struct DeviceRotation {
  std::optional<uint64_t> current;
  std::optional<std::chrono::steady_clock::time_point> running_since;
  policies::RotationDecision last;
  // Per rotating job: the most swappable memory it has declared here, and when that last grew
  // (policies::RotationJob's peak_bytes and growing).
  struct Growth {
    uint64_t peak = 0;
    std::chrono::steady_clock::time_point grew_at{};
  };
  std::map<uint64_t, Growth> growth;
};

struct MemoryBroker {
  std::map<int, uint64_t> physical;  // device -> physical bytes, as a shim's driver reported them
  std::deque<PendingAdmission> pending;
  std::map<int, DeviceRotation> rotation;  // devices whose opportunistic jobs take turns now

  // The capacity of a device: configured (bytes, or a fraction of the physical size), else the
  // physical size less the reserve; nullopt while neither is known (admission then fails open).
  std::optional<uint64_t> capacity(const MemoryConfig& config, int device) const;
};

// All it declared there (each allocation's held_bytes: unclaimed reservations too).
uint64_t job_bytes(const Job& job, int device);
uint64_t job_swappable(const Job& job, int device);  // its managed memory the shim can move
uint64_t job_swappable_total(const Job& job);        // ... on all its devices
// While it swaps out: the bytes of the current request its shim reports moved to host and
// synchronised (control block swap_progress_*), clamped to its swappable memory; else 0.
uint64_t job_swap_progress(const Job& job);
// That progress as room freed on `device` (what cannot have come from its other devices).
uint64_t job_moved_out(const Job& job, int device);
uint64_t job_resident(const Job& job, int device);  // what of it is on the device now
// What of its swappable memory is on the device now (or coming: a swap-in counts what it brings).
uint64_t job_swappable_resident(const Job& job, int device);
// Of a swapped-out job, what the driver refused to move and stays on the device (memory_job.h).
uint64_t job_unmoved(const Job& job, int device);
// Its declared bytes that admission does not count: beyond what NVML sees its process hold
// (memory_audit.h); at most its non-swappable bytes there.
uint64_t job_unhonoured(const Job& job, int device);
bool holds_memory_on(const Job& job, int device);
DeviceMemoryUse device_use(Registry& registry, int device);
// The job's limit per device: `gpusharectl set-limit`, else the first matching rule.
std::optional<uint64_t> job_limit(const MemoryConfig& config, const Job& job);
// The memory part of `gpusharectl jobs` for one job (memory_ctl.cpp, docs/memory.md): its swap
// state, limit, bytes by kind and, with `with_sites`, its largest allocation sites, at most
// kSitesInReply of them with a count of the others, so that one job cannot make the reply too
// big to send.
inline constexpr size_t kSitesInReply = 16;
nlohmann::json job_memory_report(const MemoryConfig& config, const Job& job, bool with_sites);

}  // namespace gpushare::daemon

namespace gpushare::daemon {

// memory_swap.cpp: asks the job's shim to move its swappable memory (to host: pausing its
// launches first; to the device: it resumes once the shim confirms). A `bound` on a move to the
// device brings at most that many bytes and leaves the job paused (rotation's prefetch: it ends
// `prefetched`, docs/memory.md).
void request_residency(Job& job, bool to_host, std::chrono::steady_clock::time_point now,
                       std::optional<uint64_t> bound = std::nullopt);
// The thesis's penalty: its swappable bytes on `device` over its measured transfer rate (a
// default rate until its first swap is measured).
double swap_in_seconds(const Job& job, int device);
// A prefetched job whose memory is all on the device (a bounded swap-in brought all of it) runs.
void resume_prefetched(Job& job);
// Writes every job's view (total, free) of each device into its control block.
void publish_views(Registry& registry, const MemoryBroker& broker, const MemoryConfig& config);

}  // namespace gpushare::daemon
