// gpushared's configuration: /etc/gpushare/gpushared.json, or the file named by --config.
// The schema is documented in docs/daemon.md and shown by deploy/gpushared.json.
//
// Every field is validated; an error names the JSON path and what was expected. A bad file is
// rejected as a whole, so a reload that fails leaves the previous configuration in force.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "container_identity.h"
#include "gpushare/policies/policy.h"
#include "memory_config.h"
#include "metrics_config.h"
#include "mps_config.h"
#include "pod_allocations.h"

namespace gpushare::daemon {

inline constexpr const char* kDefaultConfigPath = "/etc/gpushare/gpushared.json";
inline constexpr const char* kDefaultSocketPath = "/run/gpushare/gpushared.sock";

// A job may register as production when at least one rule matches it; a rule matches when every
// field it names matches (a rule naming nothing is refused by validation).
struct ProductionRule {
  std::optional<uid_t> uid;        // from "uid" or "user"
  std::optional<gid_t> gid;        // from "gid" or "group": the primary or a supplementary group
  std::optional<std::string> job;  // fnmatch(3) pattern on the job name
  // The job's pod, from its cgroup (container_identity.h); a rule naming any of these never
  // matches a job outside a pod.
  std::optional<std::string> pod_uid;       // lowercase, as container_identity.h writes it
  std::optional<std::string> container_id;  // 64 lowercase hex
  std::optional<PodQos> qos;
  // The device plugin's allocation (pod_allocations.h): the extended resource the job's container
  // was allocated, its pod's namespace, and an fnmatch(3) pattern on the pod's name.
  std::optional<std::string> resource;
  std::optional<std::string> pod_namespace;
  std::optional<std::string> pod_name;
  std::string text;  // the rule as written, for log lines

  // Whether the rule names who runs the job (uid, gid, pod, container, the resource the kubelet
  // allocated, or the namespace, whose pods only those RBAC allows may create). A job name, a QoS
  // class and a pod name are chosen by whoever starts the job or writes the pod spec, so a rule
  // naming only those identifies nobody and matches nothing.
  bool names_an_identity() const {
    return uid || gid || pod_uid || container_id || resource || pod_namespace;
  }
  bool names_an_allocation() const { return resource || pod_namespace || pod_name; }
};

struct Config {
  std::string socket_path = kDefaultSocketPath;
  mode_t socket_mode = 0666;          // everyone may connect: authorisation is per request
  std::optional<gid_t> socket_group;  // none: the daemon's own group
  std::optional<gid_t> admin_group;   // members may change anything, like root
  std::vector<ProductionRule> production_rules;
  std::string default_policy = "none";
  std::map<int, std::string> device_policies;  // overrides default_policy per device
  std::map<std::string, policies::Parameters> policy_parameters;  // by policy name
  std::chrono::milliseconds tick{50};
  size_t max_clients = 1024;
  std::string log_level = "info";
  MemoryConfig memory;  // docs/memory.md
  MpsConfig mps;        // docs/mps.md
  MetricsConfig metrics;  // docs/metrics.md
  KubernetesConfig kubernetes;  // docs/kubernetes.md
};

struct ConfigResult {
  std::optional<Config> config;
  std::vector<std::string> errors;  // "path: what was expected", one per problem
  std::string error_text() const;   // the errors joined with "; "
};

// Parses JSON text (pure apart from user/group name lookups).
ConfigResult parse_config(std::string_view text);
// Reads and parses a file; an unreadable file is one error naming the file.
ConfigResult load_config(const std::string& path);

// The policies the daemon knows (the registry of policies/ is the one list).
bool policy_known(std::string_view name);
std::string known_policies_text();  // "harvest, tgs, priority, fair, none"

}  // namespace gpushare::daemon
