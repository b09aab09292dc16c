// Tokens are visited newest first, so an id claimed by a newer token marks every older token
// holding it as superseded in one pass.
#include "allocation_map.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "gpushare/protocol/pod_allocation.h"

namespace gpushare::deviceplugin {
namespace {

using nlohmann::json;

bool holds_all(const PodContainer& c, const AllocationToken& t) {
  auto it = c.devices.find(t.resource);
  if (it == c.devices.end()) return false;
  for (const auto& id : t.devices)
    if (std::find(it->second.begin(), it->second.end(), id) == it->second.end()) return false;
  return true;
}

}  // namespace

AllocationMap map_allocations(const std::vector<AllocationToken>& tokens,
                              const std::optional<std::vector<PodContainer>>& pods, int64_t now,
                              int64_t grace_seconds) {
  std::vector<const AllocationToken*> newest_first;
  for (const auto& t : tokens) newest_first.push_back(&t);
  std::stable_sort(newest_first.begin(), newest_first.end(),
                   [](const AllocationToken* a, const AllocationToken* b) {
                     if (a->created != b->created) return a->created > b->created;
                     return a->id > b->id;
                   });
  AllocationMap map;
  std::set<std::pair<std::string, std::string>> claimed;  // (resource, id)
  for (const AllocationToken* t : newest_first) {
    bool superseded = false;
    for (const auto& id : t->devices)
      if (!claimed.insert({t->resource, id}).second) superseded = true;
    if (superseded) {
      map.dead.push_back(t->id);
      continue;
    }
    MappedAllocation m{*t, std::nullopt};
    if (pods)
      for (const auto& c : *pods)
        if (holds_all(c, *t)) m.holder = c;
    if (m.holder) m.token.last_held = now;
    if (pods && !m.holder && now - std::max(t->created, t->last_held) > grace_seconds) {
      map.dead.push_back(t->id);
      continue;
    }
    map.live.push_back(std::move(m));
  }
  std::sort(
      map.live.begin(), map.live.end(),
      [](const MappedAllocation& a, const MappedAllocation& b) { return a.token.id < b.token.id; });
  std::sort(map.dead.begin(), map.dead.end());
  return map;
}

std::string allocation_map_json(const AllocationMap& map) {
  json allocations = json::array();
  for (const auto& m : map.live) {
    json a = {{"token", m.token.id}, {"resource", m.token.resource}, {"devices", m.token.devices}};
    if (m.holder) {
      a["namespace"] = m.holder->pod_namespace;
      a["pod"] = m.holder->pod_name;
      a["container"] = m.holder->container;
    }
    allocations.push_back(std::move(a));
  }
  return json{{"version", protocol::kAllocationMapVersion}, {"allocations", allocations}}.dump(2) +
         "\n";
}

std::string token_json(const AllocationToken& token) {
  return json{{"resource", token.resource}, {"devices", token.devices}, {"created", token.created}}
             .dump() +
         "\n";
}

std::optional<AllocationToken> token_from_json(const std::string& id, const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_object() || !doc["resource"].is_string() || !doc["devices"].is_array() ||
      !doc["created"].is_number_integer())
    return std::nullopt;
  AllocationToken t{id, doc["resource"].get<std::string>(), {}, doc["created"].get<int64_t>()};
  for (const auto& d : doc["devices"]) {
    if (!d.is_string()) return std::nullopt;
    t.devices.push_back(d.get<std::string>());
  }
  return t;
}

}  // namespace gpushare::deviceplugin
