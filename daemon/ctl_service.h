// gpusharectl's requests (JSON, docs/protocol.md): status, jobs, set-priority, policy, reload and
// set-limit. Who may do what is decided here, from the caller's kernel identity (SO_PEERCRED: the
// Peer of its connection), never from what the request says. The service owns no state: it reads
// and changes the daemon's components through the parts and hooks it is given, so it is tested
// alone (tests/daemon/ctl_service_test.cpp). The event loop frames requests and replies
// (Server::on_ctl); `gpusharectl mps` is answered by the MPS session (mps_sessions.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "authorization.h"
#include "config.h"
#include "gpu_inventory.h"
#include "memory_broker.h"
#include "metrics_snapshot.h"
#include "policy_table.h"
#include "registry.h"

namespace gpushare::daemon {

// What `status` says of the daemon itself.
struct DaemonFacts {
  double uptime_s = 0;
  std::string config_path, socket_path, proc_root;
  bool socket_activated = false;
  size_t clients = 0;            // connections open
  uint64_t dropped_clients = 0;  // connections dropped for protocol errors
};

// The components the requests read and change.
struct CtlParts {
  const Config& config;  // the daemon's: a reload replaces its value, not the object
  Registry& registry;
  PolicyTable& policies;
  const MemoryBroker& memory;  // set-limit republishes the jobs' views
  const GpuInventory& inventory;
  DaemonCounters& counters;  // refusals
};

// What the service asks of the rest of the daemon.
struct CtlHooks {
  std::function<DaemonFacts()> facts;
  // The devices `status` lists (the same as /metrics: Server::known_devices).
  std::function<std::set<int>()> known_devices;
  std::function<nlohmann::json(int device)> rotation;  // null while nothing rotates there
  // What the policy on a device believes (Scheduler::device_status and explain): null where it
  // has not decided yet, else {"production_progress": its estimate or null, "explanation": its
  // account or null}.
  std::function<nlohmann::json(int device)> policy_state;
  // A job's class changes: the job and its shim learn it (shim_sessions.h).
  std::function<void(Job& job, protocol::JobClass to, const Peer& by)> set_class;
  std::function<ConfigResult()> reload;
};

class CtlService {
 public:
  CtlService(CtlParts parts, CtlHooks hooks) : parts_(parts), hooks_(std::move(hooks)) {}

  // The reply to one request, a JSON object with a "command" string (the event loop drops a
  // client that sends anything else): {"ok": true, ...} or
  // {"ok": false, "error": what was wrong}. A field of the wrong type is answered as a malformed
  // request, never thrown.
  nlohmann::json answer(const Peer& caller, const nlohmann::json& request);

 private:
  nlohmann::json status();
  nlohmann::json jobs();
  nlohmann::json set_priority(const Peer& caller, const nlohmann::json& request);
  nlohmann::json policy(const Peer& caller, const nlohmann::json& request);
  nlohmann::json reload(const Peer& caller);
  // {"command": "set-limit", "pid": N | "job": name, "bytes": N | null | "unlimited"}.
  nlohmann::json set_limit(const Peer& caller, const nlohmann::json& request);
  // The jobs a request names by "pid" or "job" (`target` describes them for messages); an error
  // message when it names none, no registered job, or by name the jobs of several users.
  std::optional<std::string> find_targets(const nlohmann::json& request, std::vector<Job*>* targets,
                                          std::string* target);

  CtlParts parts_;
  CtlHooks hooks_;
};

}  // namespace gpushare::daemon
