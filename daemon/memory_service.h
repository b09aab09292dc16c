// The memory commands (docs/memory.md): a declaration admitted against the device's capacity and
// the job's limit, refused, or deferred while opportunistic jobs move their memory to host; the
// production allocations waiting for that room; the moves' acknowledgements, swap-in and rotating
// residency each tick; reservations never used, expired; declarations checked against NVML. The
// service owns the memory broker's state (memory_broker.h), the memory trace and the declaration
// audit; it works on the registry and the config it is given and asks the rest of the daemon,
// through hooks, to send an answer or drop a client. So admission, swap and reservations are
// tested alone (tests/daemon/memory_service_test.cpp); the event loop frames the messages and
// calls the tick. One concern per file: memory_admission.cpp (declarations, reservations, the
// audit), memory_swap.cpp (moves, waiters, the tick), memory_rotation.cpp (rotating residency).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "client_hooks.h"
#include "config.h"
#include "connection_table.h"
#include "gpushare/policies/admission.h"
#include "gpushare/protocol/wire.h"
#include "log_limiter.h"
#include "memory_audit.h"
#include "memory_broker.h"
#include "memory_trace.h"
#include "metrics_snapshot.h"
#include "nvml_usage.h"
#include "registry.h"

namespace gpushare::daemon {

// A reservation is released by the shim right after its allocation is made (docs/memory.md); one
// still held after this long was never used, and stops counting.
constexpr auto kReservationLifetime = std::chrono::seconds(15);

// The components the memory commands read and change.
struct MemoryParts {
  const Config& config;  // the daemon's: a reload replaces its value, not the object
  Registry& registry;
  DaemonCounters& counters;  // refusals
  LogLimiter& log_limiter;   // refusals and expiries, a few lines per job and reason
};

// What the memory commands ask of the rest of the daemon.
struct MemoryHooks {
  // Sends the answer to a declaration (a failed send drops or disconnects the client).
  std::function<void(Connection& c, const protocol::MemReply& answer)> reply;
  // The connection of `fd`, or nullptr when it is gone (a deferred answer looks it up again).
  std::function<Connection*(int fd)> connection;
  DropClient drop;
  WarnLimited warn;
};

class MemoryService {
 public:
  MemoryService(MemoryParts parts, MemoryHooks hooks) : parts_(parts), hooks_(std::move(hooks)) {}

  // Starts the NVML sampler `memory.nvml_sample_ms` asks for (none: declarations are not checked).
  void start();

  // memory_admission.cpp. A well-formed declaration (shim_sessions.h checked it): admitted,
  // refused (the shim returns CUDA_ERROR_OUT_OF_MEMORY; the log line says why), or, for production
  // that fits only once opportunistic memory has moved to host, deferred until serve_waiters.
  void admit(Connection& c, Job& job, const protocol::MemDeclare& m);
  // An allocation of the job on `device` was released.
  void released(Job& job, int device);
  // A shim's report of a device's physical size; an allocation site's text (GPUSHARE_TRACE_ALLOC).
  void on_device_info(Connection& c, const protocol::DeviceInfo& d);
  void on_alloc_site(Connection& c, const protocol::AllocSite& s);
  // Reservations held kReservationLifetime since their admission stop counting.
  void expire_reservations(Clock::time_point now);

  // memory_swap.cpp. Each tick: the shims' acknowledgements of moves, the waiting allocations,
  // swap-in or rotation, the jobs' views, the trace; once a second the reservations' expiry; the
  // latest NVML reading.
  void tick(Clock::time_point now);
  // The waiting production allocations, in order per device, answered as room returns (or let
  // through past memory.swap_timeout_ms, or at once where nothing moving or movable can make the
  // room: memory the driver refused to move stays on the device).
  void serve_waiters(Clock::time_point now);

  // memory_rotation.cpp: the rotation of `device` as `gpusharectl status` shows it; null while
  // nothing rotates there.
  nlohmann::json rotation_json(int device) const;

  // What the rest of the daemon reads: capacities, physical sizes, waiters, rotations.
  const MemoryBroker& broker() const { return broker_; }

 private:
  void check_declarations(Clock::time_point now);  // against NVML's readings (memory_audit.h)
  // memory_admission.cpp: the opportunistic jobs whose memory on `device` could move to host,
  // and the request that moves those chosen (for production job `for_job`).
  std::vector<policies::MovableJob> movable_jobs(int device);
  void swap_out(const std::vector<uint64_t>& victims, const Job& for_job, int device,
                Clock::time_point now);
  void answer(uint64_t job_id, int fd, bool admitted);
  void swap_in_when_room(Clock::time_point now);  // without rotation
  void rotate_memory(Clock::time_point now);      // with rotation, each device
  void rotate_device(int device, Clock::time_point now);

  MemoryParts parts_;
  MemoryHooks hooks_;
  MemoryBroker broker_;
  MemoryTrace trace_;                  // memory.trace: what gpushare-sim's memory model replays
  std::unique_ptr<NvmlSampler> nvml_;  // declarations checked against real use (memory_audit.h)
  uint64_t nvml_seen_ = 0;             // the last reading applied
  DeclarationAudit declaration_audit_;
  Clock::time_point last_expiry_check_;
};

}  // namespace gpushare::daemon
