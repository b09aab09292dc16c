// Which allocation went to which pod. The plugin knows each allocation by its token (created on
// Allocate) and its share ids; the kubelet's PodResources API knows which pod's container holds
// which ids. Joining the two gives the map the daemon reads (gpushare/protocol/pod_allocation.h),
// and says which tokens are dead: superseded (a newer allocation holds one of their ids, which the
// kubelet hands out to one container at a time) or unheld past a grace period (the pod is gone,
// or the kubelet never started the container). Unheld means unheld for the whole grace period
// since the token was made or last seen held: a kubelet that has just restarted lists only the
// pods it has synced so far, and must not end the allocations of the others.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpushare::deviceplugin {

struct AllocationToken {
  std::string id;        // 32 lowercase hex, also the token file's name
  std::string resource;  // "gpushare.io/production"
  std::vector<std::string> devices;
  int64_t created = 0;    // unix seconds
  int64_t last_held = 0;  // unix seconds PodResources last showed it held; not in the file
  bool operator==(const AllocationToken&) const = default;
};

// One container of PodResources' List, with its devices by resource name.
struct PodContainer {
  std::string pod_namespace;
  std::string pod_name;
  std::string container;
  std::map<std::string, std::vector<std::string>> devices;
};

struct MappedAllocation {
  AllocationToken token;
  std::optional<PodContainer> holder;  // none: not (yet) seen in PodResources
};

struct AllocationMap {
  std::vector<MappedAllocation> live;
  std::vector<std::string> dead;  // token ids to remove
};

// `pods`: the last List answer; none when the kubelet could not be asked, in which case no token
// is declared unheld (superseded ones still are). Tokens seen held get last_held = now in `live`.
AllocationMap map_allocations(const std::vector<AllocationToken>& tokens,
                              const std::optional<std::vector<PodContainer>>& pods, int64_t now,
                              int64_t grace_seconds);

// The file the daemon reads: {"version": 1, "allocations": [{"token", "resource", "devices",
// "namespace", "pod", "container"}]}, the last three only when known.
std::string allocation_map_json(const AllocationMap& map);

// A token file's text, and back (the plugin reads its tokens again after a restart).
std::string token_json(const AllocationToken& token);
std::optional<AllocationToken> token_from_json(const std::string& id, const std::string& text);

}  // namespace gpushare::deviceplugin
