// Who may do what. Identities come from SO_PEERCRED / SO_PEERGROUPS only, never from a message.
//
//   - Root and members of the configured admin group may change anything.
//   - Any other user may only lower the priority of its own jobs (production -> opportunistic).
//   - Registering as production needs a matching rule in the config; otherwise the job is
//     registered as opportunistic and the refusal is logged.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "gpushare/protocol/control_block.h"

namespace gpushare::daemon {

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups at connect time (SO_PEERGROUPS)
  // The pod and container of pid, from its cgroup (container_identity.h); set at registration,
  // none outside Kubernetes.
  std::optional<PodIdentity> pod;

  bool in_group(gid_t g) const;
};

bool is_admin(const Config& config, const Peer& peer);

// The first production rule matching the peer and job name, or nullptr. A job name is chosen by
// whoever starts the job (GPUSHARE_JOB) and a QoS class by whoever writes the pod spec, so a rule
// that names only those (no uid, gid, pod_uid or container_id) matches nobody: config_warnings()
// says so.
const ProductionRule* production_rule_for(const Config& config, const Peer& peer,
                                          std::string_view job_name);

// Problems that do not make the file invalid but that its author should hear of, such as a
// production rule that trusts a job name alone: printed by --check-config, logged at start and
// on reload.
std::vector<std::string> config_warnings(const Config& config);

struct Decision {
  bool allowed;
  std::string reason;  // why not, for the log line and the ctl reply
};

// May `caller` move a job owned by `owner_uid` from class `from` to class `to`?
Decision may_set_priority(const Config& config, const Peer& caller, uid_t owner_uid,
                          protocol::JobClass from, protocol::JobClass to);

// May `caller` change daemon-wide settings (policy, reload)?
Decision may_administer(const Config& config, const Peer& caller);

const char* class_name(protocol::JobClass c);

}  // namespace gpushare::daemon
