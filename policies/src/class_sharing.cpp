#include "class_sharing.h"

#include <algorithm>

namespace gpushare::policies {
namespace {

// How fast the most a class launched in a window is forgotten, per window (half in ~70 windows).
constexpr double kPeakDecay = 0.01;

}  // namespace

void ClassSharing::observe(const DeviceObservation& device) {
  std::map<uint64_t, JobState> seen;
  for (const JobObservation& job : device.jobs) {
    JobState& state = seen[job.job_id] = jobs_[job.job_id];
    state.cost.observe(job);
  }
  jobs_ = std::move(seen);
}

// Whether a job would have used more than it got. Waiting at the gate says so. Kernels still queued
// say so too, unless the job left half of its allowance unused: then the GPU or its own pace held
// it, and counting it as wanting more would shrink everyone's budget.
bool ClassSharing::wants_more(const JobObservation& job, const JobState& state) {
  if (job.gate_waits > 0) return true;
  if (job.in_flight.value_or(0) == 0) return false;
  return state.allowance == kUnlimited || 2 * job.launches >= state.allowance;
}

void ClassSharing::share(const DeviceObservation& device, JobClass job_class,
                         std::vector<Gate>& gates) {
  std::vector<size_t> members;
  double others_busy_ns = 0;
  bool others_known = true;
  for (size_t i = 0; i < device.jobs.size(); ++i) {
    if (device.jobs[i].job_class == job_class) {
      members.push_back(i);
    } else {
      others_busy_ns += static_cast<double>(device.jobs[i].busy_ns.value_or(0));
      others_known = others_known && device.jobs[i].busy_ns.has_value();
    }
  }
  // Quotas only where they can change who gets what: two jobs or more at work (launching, with
  // kernels in flight, or held at the gate), with different weights. A job at work among idle ones
  // takes what they leave anyway, and equal weights are what the GPU's own time-slicing gives
  // between processes; a quota there only holds launches until the next window. On the H100 (S3:
  // N equal inference clients under harvest with no production job, where this sharing was the
  // only gate, all seven registered while N of them ran) it cost 64 % of one client's requests/s
  // beside six idle ones, and 29 % with seven at work.
  size_t working = 0;
  bool weights_differ = false;
  for (size_t i : members) {
    const JobObservation& job = device.jobs[i];
    working += job.launches > 0 || job.gate_waits > 0 || job.in_flight.value_or(0) > 0 ? 1 : 0;
    weights_differ = weights_differ || job.weight != device.jobs[members.front()].weight;
  }
  if (members.size() < 2 || working < 2 || !weights_differ) {
    for (size_t i : members) jobs_[device.jobs[i].job_id].allowance = gates[i].launches;
    return;
  }

  bool time_known = true;
  for (size_t i : members) time_known = time_known && jobs_[device.jobs[i].job_id].cost.known();

  std::vector<Claim> claims;
  std::vector<double> costs;
  double used_total = 0;
  for (size_t i : members) {
    const JobObservation& job = device.jobs[i];
    const JobState& state = jobs_[job.job_id];
    const double cost = time_known ? state.cost.ns_per_launch : 1.0;
    const double used = static_cast<double>(job.launches) * cost;
    used_total += used;
    // The extra `cost` lets a job that launched nothing get one launch back.
    claims.push_back(
        {job.weight, wants_more(job, state) ? kNoLimit : used * (1 + headroom_) + cost});
    costs.push_back(cost);
  }
  const double window_ns = window_seconds(device) * kNsPerSecond;
  Peak& peak = peaks_[job_class];
  peak.used =
      peak.in_time == time_known ? std::max(used_total, peak.used * (1 - kPeakDecay)) : used_total;
  peak.in_time = time_known;
  const bool capacity_known = time_known && others_known;
  if (!capacity_known && peak.used == 0) {
    // Nothing launched lately (a class just released from a pause): no use to split yet. Leave
    // the gates open for a window and split what it shows.
    for (size_t i : members) jobs_[device.jobs[i].job_id].allowance = gates[i].launches;
    return;
  }
  double budget = capacity_known ? std::max(window_ns - others_busy_ns, used_total)
                                 : peak.used * (1 + headroom_);
  for (double cost : costs) budget += cost;  // at least one launch each, so an idle class restarts
  const std::vector<double> shares = split_by_weight(budget, claims);
  for (size_t k = 0; k < members.size(); ++k) {
    JobState& state = jobs_[device.jobs[members[k]].job_id];
    Gate& gate = gates[members[k]];
    gate.launches = whole_launches(shares[k] / costs[k], state.carry);
    state.allowance = gate.launches;
  }
}

}  // namespace gpushare::policies
