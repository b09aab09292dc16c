// The memory part of gpusharectl's `jobs` (docs/memory.md); `set-limit` is the ctl service's.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "gpushare/protocol/wire.h"
#include "memory_broker.h"
#include "memory_job.h"
#include "registry.h"

namespace gpushare::daemon {

using nlohmann::json;

json job_memory_report(const MemoryConfig& config, const Job& job, bool with_sites) {
  const JobMemory& m = job.memory_state;
  std::optional<uint64_t> limit = job_limit(config, job);
  uint64_t swappable = 0, reserved = 0;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> by_site;  // site -> (bytes, allocations)
  for (const auto& [key, a] : job.memory) {
    if (a.claimed) continue;  // a claimed reservation: its commit is the allocation
    const uint64_t bytes = held_bytes(a);
    if (a.flags & static_cast<uint32_t>(protocol::MemDeclareFlags::swappable)) swappable += bytes;
    if (a.flags & static_cast<uint32_t>(protocol::MemDeclareFlags::reservation)) reserved += bytes;
    if (a.site) by_site[a.site].first += bytes, ++by_site[a.site].second;
  }
  json out = {{"state", swap_state_name(m.state)},
              {"limit_bytes", limit ? json(*limit) : json(nullptr)},
              {"swappable_bytes", swappable},
              {"reserved_bytes", reserved},
              // Swapping out: what its shim reports already on host (clamped); 0 otherwise.
              {"moved_bytes", job_swap_progress(job)},
              {"reward", m.reward},
              {"swaps_out", m.swaps_out},
              {"swaps_in", m.swaps_in},
              {"swapped_out_bytes", m.swapped_out_bytes},
              {"swapped_in_bytes", m.swapped_in_bytes}};
  uint64_t on_host = 0;
  for (const auto& [device, bytes] : job.memory_by_device())
    on_host += bytes - std::min(bytes, job_resident(job, device));
  out["on_host_bytes"] = on_host;
  // Rotation's prefetch: what of it is on the device ahead of its turn (memory_job.h).
  out["prefetched_bytes"] =
      m.state == SwapState::prefetched ? m.partly_on_device.value_or(0) : uint64_t{0};
  // Swapped out but for what the driver refused to move, which stays on the device (memory_job.h).
  uint64_t unmoved = 0;
  for (const auto& [device, bytes] : job.memory_by_device()) unmoved += job_unmoved(job, device);
  out["unmoved_bytes"] = unmoved;
  // Declarations checked against NVML (memory_audit.h): null when not measured.
  uint64_t unhonoured = 0;
  for (const auto& [device, bytes] : job.memory_by_device())
    unhonoured += job_unhonoured(job, device);
  out["measured_bytes"] = m.measured_bytes ? json(*m.measured_bytes) : json(nullptr);
  out["unhonoured_bytes"] = unhonoured;
  if (with_sites) {
    // Site ids come from the client: only announced ones are listed by id; the others (made up,
    // or announced to a daemon before a restart) share one "?" entry. At most kSitesInReply,
    // the largest, are listed, so one job cannot make `jobs` too big to send.
    std::vector<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> listed;
    std::pair<uint64_t, uint64_t> unannounced{0, 0};
    for (const auto& [site, use] : by_site) {
      if (m.sites.count(site)) {
        listed.push_back({site, use});
      } else {
        unannounced.first += use.first;
        unannounced.second += use.second;
      }
    }
    if (unannounced.second) listed.push_back({0, unannounced});
    std::sort(listed.begin(), listed.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    json sites = json::array();
    uint64_t omitted = 0, omitted_bytes = 0;
    for (const auto& [site, use] : listed) {
      if (sites.size() >= kSitesInReply) {
        ++omitted;
        omitted_bytes += use.first;
        continue;
      }
      sites.push_back({{"site", site},
                       {"where", site ? m.sites.at(site) : std::string("?")},
                       {"bytes", use.first},
                       {"allocations", use.second}});
    }
    out["sites"] = sites;
    if (omitted) {
      out["sites_omitted"] = omitted;
      out["sites_omitted_bytes"] = omitted_bytes;
    }
  }
  return out;
}

}  // namespace gpushare::daemon
