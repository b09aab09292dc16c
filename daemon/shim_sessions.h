// The shim's session with the daemon: its registration (identity from the kernel, the class it is
// granted, its control block) and its memory declarations and releases, each checked before
// anything is believed. Like the ctl service, the component owns no state: it works on the
// registry and the config it is given and asks the rest of the daemon, through hooks, to send a
// reply, drop a client or decide on memory (memory_service.h). So every check and refusal is
// tested alone (tests/daemon/shim_sessions_test.cpp); the event loop frames the messages.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "authorization.h"
#include "client_hooks.h"
#include "config.h"
#include "connection_table.h"
#include "gpushare/protocol/wire.h"
#include "metrics_snapshot.h"
#include "registry.h"

namespace gpushare::daemon {

// The components a session reads and changes.
struct ShimParts {
  const Config& config;            // the daemon's: a reload replaces its value, not the object
  const std::string& config_path;  // named in a refusal of production
  const std::string& proc_root;    // where <pid>/cgroup is read to find a job's pod
  Registry& registry;
  DaemonCounters& counters;  // refusals
};

// What a session asks of the rest of the daemon.
struct ShimHooks {
  // Sends one frame (with a descriptor when pass_fd >= 0); false when the client is gone or was
  // dropped meanwhile (then `c` must not be used again).
  std::function<bool(Connection& c, protocol::MessageType type, const void* payload, size_t length,
                     int pass_fd)>
      reply;
  DropClient drop;
  // The connection is a registered shim now (its counts and limits change: connection_table.h).
  std::function<void(Connection& c)> registered;
  WarnLimited warn;
  // Was the process told, before its cuInit, to be an MPS client (mps_sessions.h)?
  std::function<bool(pid_t pid)> mps_client;
  // A well-formed declaration: admitted, refused or deferred (memory_service.h).
  std::function<void(Connection& c, Job& job, const protocol::MemDeclare& m)> admit_memory;
  // An allocation of the job on `device` was released.
  std::function<void(Job& job, int device)> memory_released;
  // The set of jobs changed (systemd's status line).
  std::function<void()> jobs_changed;
};

// Bounds on what one job may declare, so a lying client cannot grow the daemon without limit or
// overflow the per-device sums: 2^20 allocations of at most 2^43 bytes (8 TiB) sum below 2^64.
constexpr size_t kMaxAllocationsPerJob = size_t{1} << 20;
constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 43;

class ShimSessions {
 public:
  ShimSessions(ShimParts parts, ShimHooks hooks) : parts_(parts), hooks_(std::move(hooks)) {}

  // A registration: refused (and the client dropped) when malformed, else a job with the class
  // its kernel identity earns (production only where a rule matches), its control block passed
  // back with the reply.
  void on_register(Connection& c, const protocol::RegisterRequest& r);
  void on_mem_declare(Connection& c, const protocol::MemDeclare& m);
  void on_mem_release(Connection& c, const protocol::MemRelease& m);
  // A job's class changes (gpusharectl set-priority): the job and its shim (its control block)
  // learn it; the scheduler reads it at its next tick.
  void set_job_class(Job& job, protocol::JobClass to, const Peer& by);

 private:
  ShimParts parts_;
  ShimHooks hooks_;
};

// Why a registration is malformed, or "" when it is well formed.
std::string registration_problem(const protocol::RegisterRequest& r);
// Why a memory declaration is malformed for a job holding `held` allocations, one of them
// `known` (the same device and handle), or "" when it is well formed.
std::string declaration_problem(const protocol::MemDeclare& m, size_t held, bool known);

}  // namespace gpushare::daemon
