// Who may be an MPS client, and with which client settings (docs/mps.md). Pure decisions, so the
// unit tests drive them with plain values; the supervisor (mps_supervisor.h) supplies the facts.
//
// An MPS server runs as one user. A control daemon run by an unprivileged user only ever serves
// that user; one run by root starts a server as the user of the first client, and queues a client
// of another user until every client of the current server has exited (nvidia-cuda-mps-control(1)).
// A queued client would hang in cuInit, so the daemon never hands the pipe to a second user while
// the first one's clients run: that job is time-sliced instead.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gpushare/protocol/control_block.h"

namespace gpushare::daemon {

// What the supervisor knows about the MPS control daemon right now.
struct MpsService {
  bool available = false;      // a control daemon serves pipe_directory
  std::string pipe_directory;  // CUDA_MPS_PIPE_DIRECTORY of its clients
  uid_t owner_uid = 0;         // the user the control daemon runs as
  std::string unavailable;     // why not, when !available ("MPS is off", "... failed: ...")
};

struct MpsAccess {
  bool granted = false;
  std::string why;          // when refused: one sentence for the log and the shim
  bool other_user = false;  // refused because MPS serves another user (logged once per uid)
};

// May a process of `peer_uid` become a client now? `serving_uid`: the user whose granted clients
// still run (none: the server is free for anyone the control daemon may serve).
MpsAccess decide_mps_access(const MpsService& service, uid_t peer_uid,
                            std::optional<uid_t> serving_uid);

struct MpsClientSettings {
  uint32_t priority = 1;           // CUDA_MPS_CLIENT_PRIORITY: 0 normal (production), 1 below
  uint32_t thread_percentage = 0;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, 0: no limit
};

// Production gets the normal priority and the whole GPU; opportunistic the lower priority and
// mps_thread_percentage when configured.
MpsClientSettings mps_client_settings(protocol::JobClass granted,
                                      std::optional<int> thread_percentage);

// The clients the daemon has let in, by pid (SO_PEERCRED), until their process exits. They tell
// which user the MPS server is serving. A pid is checked with `alive`, so tests need no processes.
class MpsClients {
 public:
  using Alive = std::function<bool(pid_t)>;
  void add(pid_t pid, uid_t uid) { clients_[pid] = uid; }
  bool contains(pid_t pid) const { return clients_.count(pid) != 0; }
  // Forgets exited clients, then: the user of the ones left (none when there are none).
  std::optional<uid_t> serving_uid(const Alive& alive);
  size_t size() const { return clients_.size(); }

 private:
  std::map<pid_t, uid_t> clients_;
};

// The process exists and has not exited (kill(pid, 0); EPERM: another user's; not a zombie).
bool process_alive(pid_t pid);

}  // namespace gpushare::daemon
