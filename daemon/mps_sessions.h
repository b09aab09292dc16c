// The shim's MPS question, asked on a short connection of its own before its real cuInit
// (docs/mps.md "What a job sees", docs/protocol.md), and the ctl's `mps` command. The answer is
// decided from the peer's kernel identity (SO_PEERCRED) and the configuration, never from what the
// client claims: the class is the one registration would grant (production only where a rule
// matches). Like the shim sessions (shim_sessions.h), the component works on the parts it is given
// and asks the rest of the daemon, through hooks, for the supervisor's facts, to send a reply or
// to drop a client, so every answer and refusal is tested alone
// (tests/daemon/mps_sessions_test.cpp).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "client_hooks.h"
#include "config.h"
#include "connection_table.h"
#include "gpushare/protocol/wire.h"
#include "mps_access.h"

namespace gpushare::daemon {

// The components the sessions read and change.
struct MpsParts {
  const Config& config;          // the daemon's: production rules, thread percentage, kubernetes
  const std::string& proc_root;  // where <pid>/cgroup is read to find a job's pod
  MpsClients& clients;           // the processes told to be MPS clients, while they run
};

// What the sessions ask of the rest of the daemon.
struct MpsHooks {
  ReplyFrame reply;
  DropClient drop;
  // The supervisor's facts now (mps_supervisor.h): the service, the mode it was started in, and
  // its status for the ctl.
  std::function<MpsService()> service;
  std::function<MpsMode()> mode;
  std::function<nlohmann::json()> status;
  // Whether a client's process still runs (process_alive; tests need no processes).
  MpsClients::Alive alive;
};

class MpsSessions {
 public:
  MpsSessions(MpsParts parts, MpsHooks hooks) : parts_(parts), hooks_(std::move(hooks)) {}

  // A shim's question: dropped when malformed, else answered "use MPS" with the client settings of
  // the class its identity earns, or "no MPS" with why.
  void on_query(Connection& c, const protocol::MpsQuery& q);
  // A ctl request: answered and true when it is the `mps` command, else false (the ctl service's).
  bool answer_ctl(Connection& c, const uint8_t* payload, size_t length);

 private:
  MpsParts parts_;
  MpsHooks hooks_;
  std::set<uid_t> refused_uids_;  // users already told (in the log) that MPS serves another
};

// Why an MPS query is malformed, or "" when it is well formed.
std::string mps_query_problem(const protocol::MpsQuery& q);

}  // namespace gpushare::daemon
