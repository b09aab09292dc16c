#include "registry.h"

#include <algorithm>
#include <set>

#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {

namespace {
constexpr auto kRateWindow = std::chrono::seconds(1);
}

void LaunchRate::sample(Clock::time_point now, uint64_t launches) {
  if (!samples_.empty() && launches < samples_.back().second) samples_.clear();
  samples_.emplace_back(now, launches);
  // Keep one sample at or beyond the window's start so the rate spans a full second when it can.
  while (samples_.size() > 2 && now - samples_[1].first >= kRateWindow) samples_.pop_front();
}

double LaunchRate::per_second() const {
  if (samples_.size() < 2) return 0.0;
  const auto& [t0, n0] = samples_.front();
  const auto& [t1, n1] = samples_.back();
  double seconds = std::chrono::duration<double>(t1 - t0).count();
  return seconds > 0 ? static_cast<double>(n1 - n0) / seconds : 0.0;
}

namespace {

bool is_reservation(const DeclaredAllocation& a) {
  return a.flags & static_cast<uint32_t>(protocol::MemDeclareFlags::reservation);
}

// Adds (sign +1) or removes (-1) one allocation from the job's sums.
void count_allocation(Job& job, int device, const DeclaredAllocation& a, int sign) {
  DeviceMemory& d = job.memory_on[device];
  bool swappable = a.flags & static_cast<uint32_t>(protocol::MemDeclareFlags::swappable);
  const uint64_t bytes = held_bytes(a);
  if (sign > 0) {
    d.bytes += bytes;
    if (swappable) d.swappable += bytes;
    ++d.allocations;
    job.reservations += is_reservation(a);
  } else {
    d.bytes -= bytes;
    if (swappable) d.swappable -= bytes;
    --d.allocations;
    job.reservations -= is_reservation(a);
    if (d.allocations == 0) job.memory_on.erase(device);
  }
}

}  // namespace

void Job::set_allocation(const AllocationKey& key, const DeclaredAllocation& allocation) {
  auto [it, added] = memory.try_emplace(key, allocation);
  if (!added) {
    count_allocation(*this, key.first, it->second, -1);
    it->second = allocation;
  }
  count_allocation(*this, key.first, allocation, +1);
}

bool Job::erase_allocation(const AllocationKey& key) {
  auto it = memory.find(key);
  if (it == memory.end()) return false;
  erase_allocation(it);
  return true;
}

std::map<Job::AllocationKey, DeclaredAllocation>::iterator Job::erase_allocation(
    std::map<AllocationKey, DeclaredAllocation>::iterator it) {
  count_allocation(*this, it->first.first, it->second, -1);
  return memory.erase(it);
}

uint64_t Job::memory_bytes() const {
  uint64_t total = 0;
  for (const auto& [device, d] : memory_on) total += d.bytes;
  return total;
}

std::map<int, uint64_t> Job::memory_by_device() const {
  std::map<int, uint64_t> by_device;
  for (const auto& [device, d] : memory_on) by_device[device] = d.bytes;
  return by_device;
}

std::vector<int> Job::devices_in_use() const {
  std::vector<int> holding;
  for (const auto& [device, d] : memory_on) holding.push_back(device);
  return holding.empty() ? devices : holding;
}

Job& Registry::add(Job job) {
  uint64_t id = job.id;
  return jobs_.insert_or_assign(id, std::move(job)).first->second;
}

void Registry::remove(uint64_t id) {
  jobs_.erase(id);
}

Job* Registry::find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

Job* Registry::find_by_connection(int fd) {
  for (auto& [id, job] : jobs_)
    if (job.connection == fd) return &job;
  return nullptr;
}

std::vector<Job*> Registry::find_by_pid(pid_t pid) {
  std::vector<Job*> found;
  for (auto& [id, job] : jobs_)
    if (job.peer.pid == pid) found.push_back(&job);
  return found;
}

std::vector<Job*> Registry::find_by_name(const std::string& name) {
  std::vector<Job*> found;
  for (auto& [id, job] : jobs_)
    if (job.name == name) found.push_back(&job);
  return found;
}

void Registry::sample(Clock::time_point now) {
  for (auto& [id, job] : jobs_) job.rate.sample(now, job.block.launches());
}

}  // namespace gpushare::daemon
