// Class by allocation: which of the device plugin's resources (gpushare.io/production, …) a job's
// container was allocated, and the pod's namespace and name from the kubelet's PodResources API.
//
// The plugin publishes the map <state>/allocations.json and one token file per allocation,
// <state>/tokens/<token>, bind-mounted read-only into the container at kAllocationTokenPath
// (gpushare/protocol/pod_allocation.h). A job's allocation is the one whose token file is the
// very file (device and inode) found at that path inside the job's root, /proc/<pid>/root,
// opened without following any symlink: a container can only show the daemon a file it was
// given, never name another container's. Nothing the job sends or sets in its environment is
// read.
//
// The map is trusted only when it is a regular file owned by root (or the daemon's own user),
// writable by nobody else; it is validated strictly, and any problem refuses the whole file, with
// one reason: a job then has no allocation, so no rule by resource, namespace or pod matches.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "container_identity.h"

namespace gpushare::daemon {

struct ProductionRule;

// "kubernetes": {"allocations": "/var/lib/gpushare/device-plugin/allocations.json"}
struct KubernetesConfig {
  std::optional<std::string> allocations;  // none: no plugin, no allocation ever
};

void parse_kubernetes_config(const nlohmann::json& section, KubernetesConfig* out,
                             std::vector<std::string>* errors);

// The rule keys "resource", "namespace" and "pod" (an fnmatch pattern on the pod's name).
void parse_allocation_rule_keys(const std::string& path, const nlohmann::json& rule_json,
                                ProductionRule* rule, std::vector<std::string>* errors);

struct PodAllocation {
  std::string token;  // 32 lowercase hex
  std::string resource;
  std::vector<std::string> devices;
  // From PodResources; all three or none (the plugin has not seen the pod there yet).
  std::optional<std::string> pod_namespace;
  std::optional<std::string> pod_name;
  std::optional<std::string> container;
};

struct PodAllocations {
  std::vector<PodAllocation> allocations;
  std::string problem;  // non-empty: the whole map is refused, saying why
};

// The map's text, strictly: {"version": 1, "allocations": [...]} with nothing unknown.
PodAllocations parse_pod_allocations(std::string_view text);

struct AllocationLookup {
  std::optional<PodAllocation> allocation;
  std::string problem;  // non-empty: something was refused (the job gets no allocation)
};

// The allocation of process `pid`: its token file at kAllocationTokenPath under
// <proc_root>/<pid>/root, matched against the map at `map_path` and the tokens beside it. A
// process without a token file has no allocation and no problem.
AllocationLookup allocation_of_process(const std::string& map_path, const std::string& proc_root,
                                       long pid);

struct ProcessPod {
  std::optional<PodIdentity> pod;  // none: not in a pod
  std::string cgroup_problem;      // non-empty: a kubepods cgroup that was refused
  std::string allocation_problem;  // non-empty: an allocation that was refused
};

// Everything the daemon knows of process `pid`'s pod: its cgroup (container_identity.h) and,
// when `kubernetes` names the plugin's map and the process is in a pod, its allocation.
ProcessPod pod_of_process(const std::string& proc_root, long pid,
                          const KubernetesConfig& kubernetes);

}  // namespace gpushare::daemon
