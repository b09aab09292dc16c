// The event loop's side of /metrics: once a tick, copy what the registry, the scheduler and the
// memory broker know into a MetricsSnapshot and hand it to the endpoint's thread
// (metrics_endpoint.h). Runs only while the endpoint serves; costs a few allocations per job.
#include <spdlog/spdlog.h>

#include <set>

#include "server.h"

#ifndef GPUSHARE_VERSION
#define GPUSHARE_VERSION "unknown"
#endif

namespace gpushare::daemon {

namespace {

JobSample job_sample(const Job& job, const MemoryConfig& memory) {
  JobSample j;
  j.job = job.name;
  j.pid = job.peer.pid;
  j.uid = job.peer.uid;
  j.job_class = class_name(job.granted);
  j.device = Scheduler::device_of(job);
  j.launches = job.block.launches();
  if (std::optional<uint64_t> completed = job.block.completed_launches())
    j.completed_launches = std::min(*completed, j.launches);  // the client's word, clamped
  j.gate_waits = job.block.gate_waits();
  if (const protocol::ControlBlock* b = job.block.page()) {
    j.gate_held_ns = b->gated_ns.load(std::memory_order_relaxed);
    j.paused = b->paused.load(std::memory_order_relaxed) != 0;
  }
  j.launches_per_second = job.rate.per_second();
  std::optional<uint64_t> limit = job_limit(memory, job);
  const JobMemory& m = job.memory_state;
  for (const auto& [device, bytes] : job.memory_by_device()) {
    uint64_t resident = job_resident(job, device);
    j.memory.push_back(
        {device, bytes, limit, bytes > resident ? bytes - resident : 0, job_unmoved(job, device)});
  }
  j.swaps_out = m.swaps_out;
  j.swaps_in = m.swaps_in;
  j.swapped_out_bytes = m.swapped_out_bytes;
  j.swapped_in_bytes = m.swapped_in_bytes;
  return j;
}

}  // namespace

void Server::start_metrics() {
  if (!config_.metrics.listen) return;
  std::string error;
  // A daemon without metrics still shares the GPU: an endpoint that cannot bind is logged, not
  // fatal (docs/metrics.md).
  if (!metrics_.start(*config_.metrics.listen, &error)) return spdlog::error("metrics: {}", error);
  spdlog::info("metrics: serving /metrics on {}", metrics_.address());
  publish_metrics();
}

void Server::publish_metrics() {
  if (!metrics_.serving()) return;
  if (config_.metrics.listen.value_or(MetricsListen{}).text != metrics_.address() &&
      !metrics_restart_noted_) {
    spdlog::warn("metrics.listen changed: takes effect after a restart");
    metrics_restart_noted_ = true;
  }
  MetricsSnapshot s;
  s.version = GPUSHARE_VERSION;
  s.uptime_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  s.clients = connections_.size();
  s.protocol_errors = dropped_clients_;
  s.counters = counters_;

  for (auto& [id, job] : registry_.jobs()) s.jobs.push_back(job_sample(job, config_.memory));
  for (int device : known_devices()) {
    DeviceSample d;
    d.device = device;
    d.policy = policies_.policy_for(device);
    if (auto it = scheduler_.device_status().find(device); it != scheduler_.device_status().end()) {
      d.opportunistic_limit_per_second = it->second.opportunistic_limit_per_second;
      d.production_progress = it->second.production_progress;
    }
    d.capacity_bytes = memory_.broker().capacity(config_.memory, device);
    for (auto& [id, job] : registry_.jobs())
      (job.granted == protocol::JobClass::production ? d.production_bytes
                                                     : d.opportunistic_bytes) +=
          job_bytes(job, device);
    s.devices.push_back(std::move(d));
  }
  metrics_.publish(std::move(s));
}

}  // namespace gpushare::daemon
