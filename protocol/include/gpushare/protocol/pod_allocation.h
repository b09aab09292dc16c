// What the device plugin and the daemon agree on about a container's allocation
// (docs/kubernetes.md, "How a class is granted").
//
// On Allocate the plugin creates a token file, <state dir>/tokens/<token>, readable by root
// only, and mounts it read-only into the container at kAllocationTokenPath. It lists every token
// with its resource (and, from the kubelet's PodResources API, the pod's namespace, name and
// container) in <state dir>/allocations.json. The daemon finds a job's allocation by opening
// kAllocationTokenPath inside the job's root (/proc/<pid>/root) without following symlinks and
// comparing the file's device and inode with each listed token's: a bind mount keeps them, and
// a container can neither copy nor link a file it was never given.
#pragma once

namespace gpushare::protocol {

inline constexpr const char* kAllocationTokenPath = "/etc/gpushare/allocation";
inline constexpr const char* kAllocationMapName = "allocations.json";
inline constexpr const char* kAllocationTokenDir = "tokens";
inline constexpr int kAllocationMapVersion = 1;

}  // namespace gpushare::protocol
