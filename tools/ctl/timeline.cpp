// Events are written per job from consecutive samples: a counter at every sample, a slice for
// every run of samples with the same state (closed at the sample that changes it, or at the last
// one), an instant where a value changed between two samples. Timestamps are microseconds.
#include "timeline.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace gpushare::ctl {
namespace {

using nlohmann::json;

constexpr int kDaemonPid = 0;  // the daemon's track; jobs use their own pids

double micros(double seconds) {
  return seconds * 1e6;
}

// A state that lasts: emitted as one complete ("X") slice once it ends.
struct Run {
  std::string name;
  double since = 0;
};

class Builder {
 public:
  void metadata(int pid, int tid, const std::string& process, const std::string& thread) {
    if (named_.insert({pid, tid}).second) {
      events_.push_back({{"ph", "M"},
                         {"pid", pid},
                         {"tid", 0},
                         {"name", "process_name"},
                         {"args", {{"name", process}}}});
      events_.push_back({{"ph", "M"},
                         {"pid", pid},
                         {"tid", tid},
                         {"name", "thread_name"},
                         {"args", {{"name", thread}}}});
    }
  }
  void counter(int pid, const std::string& name, double t, json values) {
    events_.push_back({{"ph", "C"},
                       {"pid", pid},
                       {"tid", 0},
                       {"name", name},
                       {"ts", micros(t)},
                       {"args", values}});
  }
  void instant(int pid, int tid, const std::string& name, double t, json args = json::object()) {
    events_.push_back({{"ph", "i"},
                       {"s", "t"},
                       {"pid", pid},
                       {"tid", tid},
                       {"name", name},
                       {"ts", micros(t)},
                       {"args", args}});
  }
  // Continues the run on (pid, tid, lane) or ends it and starts `state` at `t`.
  void state(int pid, int tid, const std::string& lane, const std::string& state, double t) {
    Run& run = runs_[{pid, tid, lane}];
    if (run.name == state) return;
    close(pid, tid, run, t);
    run = {state, t};
  }
  void end(double t) {
    for (auto& [key, run] : runs_) close(std::get<0>(key), std::get<1>(key), run, t);
    runs_.clear();
  }
  void end_job(int pid, double t) {
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (std::get<0>(it->first) != pid) {
        ++it;
        continue;
      }
      close(pid, std::get<1>(it->first), it->second, t);
      it = runs_.erase(it);
    }
  }
  json take() { return std::move(events_); }

 private:
  void close(int pid, int tid, const Run& run, double t) {
    if (run.name.empty() || t <= run.since) return;
    events_.push_back({{"ph", "X"},
                       {"pid", pid},
                       {"tid", tid},
                       {"name", run.name},
                       {"ts", micros(run.since)},
                       {"dur", micros(t - run.since)}});
  }
  json events_ = json::array();
  std::set<std::pair<int, int>> named_;
  std::map<std::tuple<int, int, std::string>, Run> runs_;
};

// Lanes (threads) of a job's track.
constexpr int kGateLane = 1, kMemoryLane = 2;

std::string swap_slice(const std::string& memory_state) {
  if (memory_state == "swapping-out" || memory_state == "swapping_out") return "swapping out";
  if (memory_state == "swapped-out" || memory_state == "swapped_out") return "on host";
  if (memory_state == "swapping-in" || memory_state == "swapping_in") return "swapping in";
  if (memory_state == "prefetched") return "prefetched";  // rotation: partly in, paused
  return "on device";
}

}  // namespace

json build_trace(const std::vector<Sample>& samples) {
  Builder b;
  std::map<int, json> previous;  // by pid: the job's entry in the previous sample
  std::map<int, std::pair<std::string, std::string>> policies;  // by device: (what, name)
  std::map<int, double> previous_t;
  double last_t = 0;
  b.metadata(kDaemonPid, 0, "gpushared", "policies");
  for (const Sample& s : samples) {
    last_t = s.seconds;
    for (const json& d : s.devices) {
      int device = d.value("device", 0);
      std::string policy = d.value("policy", std::string());
      json parameters = d.value("parameters", json::object());
      // A change of parameters alone is a change too: the policy starts afresh.
      std::string seen = policy + parameters.dump();
      auto it = policies.find(device);
      if (it != policies.end() && it->second.first != seen)
        b.instant(kDaemonPid, device + 1, "policy " + it->second.second + " -> " + policy,
                  s.seconds, {{"parameters", parameters}});
      policies[device] = {seen, policy};
      b.metadata(kDaemonPid, device + 1, "gpushared", "device " + std::to_string(device));
      b.state(kDaemonPid, device + 1, "policy", "policy " + policy, s.seconds);
    }
    std::map<int, json> now;
    for (const json& job : s.jobs) {
      int pid = job.value("pid", 0);
      now[pid] = job;
      std::string name = job.value("job", std::string("?"));
      b.metadata(pid, kGateLane, name + " (pid " + std::to_string(pid) + ")", "gate");
      b.metadata(pid, kMemoryLane, name + " (pid " + std::to_string(pid) + ")", "memory");
      std::string job_class = job.value("class", std::string());
      const json gate = job.value("gate", json::object());
      b.state(pid, kGateLane, "gate",
              gate.value("paused", false) ? "paused (" + job_class + ")"
                                          : "running (" + job_class + ")",
              s.seconds);
      const json memory_state = job.value("memory_state", json::object());
      b.state(pid, kMemoryLane, "memory", swap_slice(memory_state.value("state", std::string())),
              s.seconds);
      uint64_t bytes = job.value("memory_bytes", uint64_t{0});
      uint64_t on_host = memory_state.value("on_host_bytes", uint64_t{0});
      b.counter(pid, "memory (MiB)", s.seconds,
                {{"device", static_cast<double>(bytes - std::min(bytes, on_host)) / (1 << 20)},
                 {"host", static_cast<double>(on_host) / (1 << 20)}});
      auto before = previous.find(pid);
      if (before == previous.end()) {
        b.instant(pid, kGateLane, "registered as " + job_class, s.seconds);
        // A job that arrived while recording: its memory so far was admitted since.
        if (&s != &samples.front() && bytes > 0)
          b.instant(pid, kMemoryLane, "admitted", s.seconds,
                    {{"bytes", bytes}, {"total_bytes", bytes}});
        continue;
      }
      const json& p = before->second;
      double dt = s.seconds - previous_t[pid];
      uint64_t launches = job.value("launches", uint64_t{0});
      uint64_t launched_before = p.value("launches", uint64_t{0});
      if (dt > 0)
        b.counter(pid, "launches/s", s.seconds,
                  {{"launches/s", launches >= launched_before
                                      ? static_cast<double>(launches - launched_before) / dt
                                      : 0.0}});
      std::string class_before = p.value("class", std::string());
      if (class_before != job_class)
        b.instant(pid, kGateLane, "class " + class_before + " -> " + job_class, s.seconds);
      uint64_t bytes_before = p.value("memory_bytes", uint64_t{0});
      if (bytes != bytes_before)
        b.instant(pid, kMemoryLane, bytes > bytes_before ? "admitted" : "released", s.seconds,
                  {{"bytes", bytes > bytes_before ? bytes - bytes_before : bytes_before - bytes},
                   {"total_bytes", bytes}});
    }
    for (const auto& [pid, job] : previous)
      if (!now.count(pid)) {
        b.instant(pid, kGateLane, "left", s.seconds);
        b.end_job(pid, s.seconds);
      }
    for (const auto& [pid, job] : now) previous_t[pid] = s.seconds;
    previous = std::move(now);
  }
  b.end(last_t);
  return {{"traceEvents", b.take()},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"source", "gpusharectl record"}, {"samples", samples.size()}}}};
}

}  // namespace gpushare::ctl
