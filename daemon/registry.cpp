#include "registry.h"

#include <algorithm>
#include <set>

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

uint64_t Job::memory_bytes() const {
  uint64_t total = 0;
  for (const auto& [key, a] : memory) total += a.bytes;
  return total;
}

std::map<int, uint64_t> Job::memory_by_device() const {
  std::map<int, uint64_t> by_device;
  for (const auto& [key, a] : memory) by_device[key.first] += a.bytes;
  return by_device;
}

std::vector<int> Job::devices_in_use() const {
  if (!devices.empty()) return devices;
  std::set<int> seen;
  for (const auto& [key, a] : memory) seen.insert(key.first);
  return {seen.begin(), seen.end()};
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
