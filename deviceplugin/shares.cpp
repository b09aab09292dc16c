// Share ids are parsed from their end ("-s<k>"), since a GPU UUID itself holds dashes.
#include "shares.h"

#include <algorithm>
#include <map>
#include <set>

namespace gpushare::deviceplugin {
namespace {

// "<gpu>-s<k>" -> (gpu, k), k without leading zeros.
std::optional<std::pair<std::string, int>> parse_share(std::string_view id) {
  size_t at = id.rfind("-s");
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  std::string_view number = id.substr(at + 2);
  if (number.empty() || number.size() > 4 || (number.size() > 1 && number[0] == '0'))
    return std::nullopt;
  int k = 0;
  for (char c : number) {
    if (c < '0' || c > '9') return std::nullopt;
    k = k * 10 + (c - '0');
  }
  return std::pair{std::string(id.substr(0, at)), k};
}

}  // namespace

std::string share_id(std::string_view gpu, int share) {
  return std::string(gpu) + "-s" + std::to_string(share);
}

std::optional<std::string> gpu_of_share(std::string_view id) {
  auto parsed = parse_share(id);
  if (!parsed) return std::nullopt;
  return parsed->first;
}

std::vector<std::string> share_ids(const std::vector<std::string>& gpus, int shares_per_gpu) {
  std::vector<std::string> ids;
  for (const auto& gpu : gpus)
    for (int k = 0; k < shares_per_gpu; ++k) ids.push_back(share_id(gpu, k));
  return ids;
}

ShareGpus gpus_of_shares(const std::vector<std::string>& ids, const std::vector<std::string>& known,
                         int shares_per_gpu) {
  ShareGpus result;
  if (ids.empty()) return {{}, "no share ids"};
  std::set<std::string> used;
  for (const auto& id : ids) {
    auto parsed = parse_share(id);
    bool ok = parsed && parsed->second < shares_per_gpu &&
              std::find(known.begin(), known.end(), parsed->first) != known.end();
    if (!ok) return {{}, "'" + id + "' is not one of this plugin's shares"};
    used.insert(parsed->first);
  }
  for (const auto& gpu : known)
    if (used.count(gpu)) result.gpus.push_back(gpu);
  return result;
}

std::vector<std::string> preferred_shares(const std::vector<std::string>& available,
                                          const std::vector<std::string>& must_include, int size) {
  std::vector<std::string> chosen;
  std::set<std::string> taken;
  std::set<std::string> gpus_in_use;
  for (const auto& id : must_include) {
    if (static_cast<int>(chosen.size()) >= size || !taken.insert(id).second) continue;
    chosen.push_back(id);
    if (auto gpu = gpu_of_share(id)) gpus_in_use.insert(*gpu);
  }
  // Free shares by GPU, each GPU's in share order.
  std::map<std::string, std::vector<std::pair<int, std::string>>> free;
  for (const auto& id : available) {
    if (taken.count(id)) continue;
    auto parsed = parse_share(id);
    if (!parsed) continue;
    free[parsed->first].emplace_back(parsed->second, id);
  }
  for (auto& [gpu, shares] : free) std::sort(shares.begin(), shares.end());
  std::vector<std::string> order;
  for (const auto& [gpu, shares] : free) order.push_back(gpu);
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    bool a_used = gpus_in_use.count(a), b_used = gpus_in_use.count(b);
    if (a_used != b_used) return a_used;
    return free[a].size() > free[b].size();
  });
  for (const auto& gpu : order)
    for (const auto& [k, id] : free[gpu]) {
      if (static_cast<int>(chosen.size()) >= size) return chosen;
      chosen.push_back(id);
    }
  return chosen;
}

}  // namespace gpushare::deviceplugin
