// A tiny deterministic model of one time-sliced GPU, for driving policies with numbers.
//
// Each job would use `demand` of the GPU alone (1 = saturating, 0 = idle) at `ns_per_launch` GPU
// time per kernel. In a window, a gate caps a job at the GPU time its allowed launches take; the
// GPU is then shared as time-slicing shares it: equal time among the jobs that want more, max-min
// (a job that wants less than an equal part leaves the rest to the others). So with one saturating
// production job, its rate is solo * (1 - opportunistic share).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gpushare/policies/policy.h"

namespace gpushare::policies::testing {

struct ModelJob {
  uint64_t id = 0;
  JobClass job_class = JobClass::opportunistic;
  double weight = 1.0;
  double demand = 1.0;
  double ns_per_launch = 100'000;
  bool report_busy = false;
  // Multiplicative noise amplitude on the launch count reported (0.02 = up to ±2 %).
  double noise = 0;

  // Filled by the model.
  Gate gate{.job_id = 0};
  double share = 0;  // GPU fraction the job got in the last window
  double carry = 0;  // fractional launches carried between windows
};

class SharedGpuModel {
 public:
  explicit SharedGpuModel(std::vector<ModelJob> jobs, uint64_t window_ns = 50'000'000)
      : jobs_(std::move(jobs)), window_ns_(window_ns) {
    for (ModelJob& job : jobs_) job.gate.job_id = job.id;
  }

  // Runs one window under the gates last applied and returns what the daemon would observe.
  DeviceObservation step() {
    std::vector<double> caps;
    for (const ModelJob& job : jobs_) caps.push_back(std::min(job.demand, gate_cap(job)));
    const std::vector<double> shares = time_slice(caps);
    DeviceObservation device{.now_ns = now_ns_ += window_ns_, .window_ns = window_ns_, .jobs = {}};
    for (size_t i = 0; i < jobs_.size(); ++i) {
      ModelJob& job = jobs_[i];
      job.share = shares[i];
      double launches = job.share * static_cast<double>(window_ns_) / job.ns_per_launch;
      if (job.noise > 0) launches *= 1 + job.noise * next_noise();
      const double whole = std::floor(launches + job.carry);
      job.carry = launches + job.carry - whole;
      JobObservation seen{.job_id = job.id,
                          .job_class = job.job_class,
                          .weight = job.weight,
                          .launches = static_cast<uint64_t>(whole),
                          .gate_waits = gate_cap(job) < job.demand ? 1u : 0u,
                          .busy_ns = std::nullopt,
                          .in_flight = queued(job) ? 1u : 0u};
      if (job.report_busy)
        seen.busy_ns = static_cast<uint64_t>(job.share * static_cast<double>(window_ns_));
      device.jobs.push_back(seen);
    }
    return device;
  }

  void apply(const std::vector<Gate>& gates) {
    for (const Gate& gate : gates)
      for (ModelJob& job : jobs_)
        if (job.id == gate.job_id) job.gate = gate;
  }

  // One tick of the daemon: run a window, let the policy decide, apply its gates.
  void tick(Policy& policy) { apply(policy.decide(step())); }

  ModelJob& job(uint64_t id) {
    for (ModelJob& job : jobs_)
      if (job.id == id) return job;
    return jobs_.front();
  }
  std::vector<ModelJob>& jobs() { return jobs_; }
  void add(ModelJob job) {
    job.gate.job_id = job.id;
    jobs_.push_back(job);
  }
  void remove(uint64_t id) {
    std::erase_if(jobs_, [id](const ModelJob& job) { return job.id == id; });
  }

 private:
  // A job has kernels queued at the end of a window when it got less of the GPU than it wanted,
  // or when it is saturating: it always has the next kernel waiting.
  static bool queued(const ModelJob& job) {
    return job.share > 0 && (job.demand >= 1 || job.share < job.demand - 1e-9);
  }

  double gate_cap(const ModelJob& job) const {
    if (job.gate.paused) return 0;
    if (job.gate.launches == kUnlimited) return 1;
    return static_cast<double>(job.gate.launches) * job.ns_per_launch /
           static_cast<double>(window_ns_);
  }

  // Max-min split of the whole GPU among jobs capped at `caps`, equal parts otherwise.
  static std::vector<double> time_slice(const std::vector<double>& caps) {
    std::vector<double> shares(caps.size(), 0);
    std::vector<bool> done(caps.size(), false);
    double left = 1;
    for (size_t round = 0; round < caps.size(); ++round) {
      size_t open = 0;
      for (size_t i = 0; i < caps.size(); ++i) open += done[i] ? 0 : 1;
      if (open == 0) break;
      const double part = left / static_cast<double>(open);
      bool settled = false;
      for (size_t i = 0; i < caps.size(); ++i) {
        if (done[i] || caps[i] > part) continue;
        shares[i] = caps[i];
        left -= caps[i];
        done[i] = settled = true;
      }
      if (!settled) {
        for (size_t i = 0; i < caps.size(); ++i)
          if (!done[i]) shares[i] = part;
        break;
      }
    }
    return shares;
  }

  // Deterministic noise in [-1, 1] (a 64-bit LCG; the same sequence on every platform).
  double next_noise() {
    noise_state_ = noise_state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(noise_state_ >> 11) / static_cast<double>(1ull << 53) * 2 - 1;
  }

  std::vector<ModelJob> jobs_;
  uint64_t window_ns_;
  uint64_t now_ns_ = 0;
  uint64_t noise_state_ = 42;
};

// Runs `ticks` ticks and returns the GPU share of job `id` in each.
inline std::vector<double> run(SharedGpuModel& gpu, Policy& policy, int ticks, uint64_t id) {
  std::vector<double> shares;
  for (int t = 0; t < ticks; ++t) {
    gpu.tick(policy);
    shares.push_back(gpu.job(id).share);
  }
  return shares;
}

// Production's share per control period (4 ticks), leaving out the windows in which a probe held
// the opportunistic jobs: production runs alone then, above target by design (every 5 s).
inline std::vector<double> production_per_period(SharedGpuModel& gpu, Policy& policy, int ticks) {
  std::vector<double> periods, window;
  for (int t = 0; t < ticks; ++t) {
    bool probing = false;
    for (const ModelJob& job : gpu.jobs())
      probing = probing || (job.job_class == JobClass::opportunistic && job.gate.paused);
    gpu.tick(policy);
    if (probing) continue;
    window.push_back(gpu.job(1).share);
    if (window.size() == 4) {
      periods.push_back((window[0] + window[1] + window[2] + window[3]) / 4);
      window.clear();
    }
  }
  return periods;
}

inline double mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

}  // namespace gpushare::policies::testing
