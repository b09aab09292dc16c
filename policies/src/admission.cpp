#include "gpushare/policies/admission.h"

#include <algorithm>

namespace gpushare::policies {
namespace {

// The opportunistic jobs holding the most movable memory, until `excess` bytes are covered.
// Ties keep the candidates' order (the daemon's registration order), so the choice is stable.
std::vector<uint64_t> choose_victims(std::vector<MovableJob> candidates, int64_t excess) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const MovableJob& a, const MovableJob& b) { return a.movable > b.movable; });
  std::vector<uint64_t> victims;
  for (const MovableJob& c : candidates) {
    if (excess <= 0) break;
    if (c.movable == 0) continue;
    excess -= static_cast<int64_t>(c.movable);
    victims.push_back(c.job_id);
  }
  return victims;
}

}  // namespace

Admission decide_admission(const AdmissionRequest& r, const std::optional<DeviceMemory>& device,
                           std::vector<MovableJob> candidates) {
  using V = AdmissionVerdict;
  if (r.limit && r.job_bytes + r.bytes > *r.limit) return {V::refuse_over_limit};
  if (!device) return {V::admit};
  const DeviceMemory& d = *device;

  if (r.job_class == JobClass::opportunistic) {
    if (r.movable && r.job_on_host) return {V::admit};  // joins its memory on the host
    if (d.resident + d.waiting + r.bytes <= d.capacity) return {V::admit};
    return {r.movable ? V::admit_on_host : V::refuse_device_full};
  }

  if (d.waiting == 0 && d.resident + r.bytes <= d.capacity) return {V::admit};
  const uint64_t fixed = d.resident - std::min(d.resident, d.evictable + d.leaving);
  if (fixed + d.waiting + r.bytes > d.capacity) return {V::refuse_beyond_capacity};
  const int64_t excess =
      static_cast<int64_t>(d.resident - std::min(d.resident, d.leaving) + d.waiting + r.bytes) -
      static_cast<int64_t>(d.capacity);
  return {V::wait_for_room, choose_victims(std::move(candidates), excess)};
}

}  // namespace gpushare::policies
