// Which Kubernetes pod and container a process runs in, as the kernel says: from the cgroup the
// kubelet and the container runtime put it in (/proc/<pid>/cgroup of the SO_PEERCRED pid), never
// from anything the client sends or sets in its environment.
//
// The kubelet names cgroups by convention (pkg/kubelet/cm/cgroup_manager_linux.go):
//
//   systemd driver   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid, '-'
//                    written '_'>.slice/cri-containerd-<64 hex>.scope   (also crio-, docker-)
//   cgroupfs driver  /kubepods/burstable/pod<uid>/<64 hex>
//
// Guaranteed pods sit directly under kubepods (no QoS level). The parser is strict: the path must
// have exactly that shape from the cgroup root down to the container, every systemd slice name
// must extend its parent's, and nothing may follow the container (a privileged container that
// makes cgroups of its own below its scope is no longer recognised). A path that is not under
// kubepods is a process outside Kubernetes; one that is but has another shape is reported as a
// problem. Either way the process has no pod identity.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace gpushare::daemon {

enum class PodQos { guaranteed, burstable, besteffort };

const char* qos_name(PodQos qos);
std::optional<PodQos> parse_qos(std::string_view name);

// A job's place in Kubernetes. qos, pod_uid and container_id come from the kernel (the cgroup
// path). The resource the container was allocated and the pod's namespace and name are not in
// the cgroup path: they come from the device plugin's allocation map, matched by the token file
// the container was given (pod_allocations.h). Labels are in neither place, so no rule names them.
struct PodIdentity {
  PodQos qos = PodQos::besteffort;
  std::string pod_uid;       // lowercase; 8-4-4-4-12 with dashes, or 32 hex (static pods)
  std::string container_id;  // 64 lowercase hex
  std::string runtime;       // "containerd", "crio", "docker", or "" (cgroupfs, bare id)
  // From the device plugin's allocation (pod_allocations.h); none without one. Namespace and
  // name also stay empty until the plugin has seen the pod in the kubelet's PodResources.
  std::optional<std::string> resource;  // "gpushare.io/production"
  std::optional<std::string> pod_namespace;
  std::optional<std::string> pod_name;
  std::optional<std::string> container_name;

  bool operator==(const PodIdentity&) const = default;
};

struct CgroupIdentity {
  std::optional<PodIdentity> pod;  // none: not in a pod (or a problem below)
  std::string problem;             // non-empty: a kubepods-looking cgroup that was refused
};

// One cgroup path (the third field of a /proc/<pid>/cgroup line).
CgroupIdentity pod_from_cgroup_path(std::string_view path);

// The whole /proc/<pid>/cgroup text: the cgroup v2 line ("0::/…") and v1 lines
// ("4:memory:/…"). Every line under kubepods must give the same pod and container; lines not
// under kubepods (v1 controllers the runtime left alone) are ignored.
CgroupIdentity pod_from_proc_cgroup(std::string_view text);

// Reads <proc_root>/<pid>/cgroup; a file that cannot be read is a problem saying why.
CgroupIdentity read_pod_identity(const std::string& proc_root, long pid);

// Pod UIDs and container ids as rules may give them.
bool valid_pod_uid(std::string_view uid);
bool valid_container_id(std::string_view id);

}  // namespace gpushare::daemon
