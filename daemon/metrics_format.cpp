// Each family is written whole (# HELP, # TYPE, then its samples) in a fixed order; a family with
// no samples is still announced, so a dashboard sees the name before the first job arrives. Jobs
// that left are simply not in the snapshot, so their series end with them.
#include "metrics_format.h"

#include <charconv>
#include <cmath>
#include <utility>
#include <vector>

namespace gpushare::daemon {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t code = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, v);  // shortest round-trip form
  return ec == std::errc() ? std::string(text, end) : "NaN";
}

std::string number(uint64_t v) {
  return std::to_string(v);
}

class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
    name_ = name;
  }
  void sample(const Labels& labels, const std::string& value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i) out_ += ',';
        out_ += labels[i].first;
        out_ += "=\"";
        out_ += escape_label_value(labels[i].second);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string_view name_;
};

// The job's name is `job_name`, not `job`: Prometheus gives every scraped series `job` (the scrape
// job's name) and would rename ours to `exported_job`.
Labels job_labels(const JobSample& j, int device) {
  return {{"job_name", j.job},
          {"pid", std::to_string(j.pid)},
          {"uid", std::to_string(j.uid)},
          {"class", j.job_class},
          {"device", std::to_string(device)}};
}

Labels with(Labels labels, std::string_view name, std::string value) {
  labels.emplace_back(name, std::move(value));
  return labels;
}

void daemon_families(Exposition& x, const MetricsSnapshot& s) {
  x.family("gpushare_build_info", "gauge", "Always 1; the daemon's version as a label.");
  x.sample({{"version", s.version}}, "1");
  x.family("gpushare_uptime_seconds", "gauge", "Seconds since the daemon started.");
  x.sample({}, number(s.uptime_seconds));
  x.family("gpushare_clients", "gauge", "Connections open now (shims and gpusharectl).");
  x.sample({}, number(s.clients));
  x.family("gpushare_jobs", "gauge", "Jobs registered now.");
  x.sample({}, number(static_cast<uint64_t>(s.jobs.size())));
  x.family("gpushare_refusals_total", "counter",
           "Requests the daemon refused, by reason (each is also one log line).");
  for (size_t r = 0; r < kRefusalNames.size(); ++r)
    x.sample({{"reason", std::string(kRefusalNames[r])}}, number(s.counters.refusals[r]));
  x.family("gpushare_protocol_errors_total", "counter",
           "Clients dropped for a malformed frame or request.");
  x.sample({}, number(s.protocol_errors));
  x.family("gpushare_tick_overruns_total", "counter",
           "Ticks the event loop missed because it was still busy when they were due.");
  x.sample({}, number(s.counters.tick_overruns));
  x.family("gpushare_config_reloads_total", "counter",
           "Configuration reloads (SIGHUP or gpusharectl reload), by result.");
  x.sample({{"result", "success"}}, number(s.counters.reloads));
  x.sample({{"result", "failure"}}, number(s.counters.failed_reloads));
}

void device_families(Exposition& x, const MetricsSnapshot& s) {
  x.family("gpushare_device_policy_info", "gauge", "Always 1; the device's policy as a label.");
  for (const DeviceSample& d : s.devices)
    x.sample({{"device", std::to_string(d.device)}, {"policy", d.policy}}, "1");
  x.family("gpushare_device_opportunistic_limit_launches_per_second", "gauge",
           "Launches per second the policy allowed all opportunistic jobs together in the last "
           "tick (+Inf: unlimited).");
  for (const DeviceSample& d : s.devices)
    if (d.opportunistic_limit_per_second)
      x.sample({{"device", std::to_string(d.device)}}, number(*d.opportunistic_limit_per_second));
  x.family("gpushare_device_production_progress_ratio", "gauge",
           "The policy's estimate of the slowest production job's rate over its solo rate.");
  for (const DeviceSample& d : s.devices)
    if (d.production_progress)
      x.sample({{"device", std::to_string(d.device)}}, number(*d.production_progress));
  x.family("gpushare_device_memory_capacity_bytes", "gauge",
           "Device memory the daemon admits allocations against.");
  for (const DeviceSample& d : s.devices)
    if (d.capacity_bytes)
      x.sample({{"device", std::to_string(d.device)}}, number(*d.capacity_bytes));
  x.family("gpushare_device_memory_used_bytes", "gauge",
           "Device memory declared by the jobs of each class.");
  for (const DeviceSample& d : s.devices) {
    x.sample({{"device", std::to_string(d.device)}, {"class", "production"}},
             number(d.production_bytes));
    x.sample({{"device", std::to_string(d.device)}, {"class", "opportunistic"}},
             number(d.opportunistic_bytes));
  }
}

void job_families(Exposition& x, const MetricsSnapshot& s) {
  x.family("gpushare_job_launches_total", "counter", "Kernel launches the job made.");
  for (const JobSample& j : s.jobs) x.sample(job_labels(j, j.device), number(j.launches));
  x.family("gpushare_job_completed_launches_total", "counter",
           "Launches known complete on the GPU (production jobs, from completion marks).");
  for (const JobSample& j : s.jobs)
    if (j.completed_launches) x.sample(job_labels(j, j.device), number(*j.completed_launches));
  x.family("gpushare_job_launches_per_second", "gauge", "Launch rate over the last second.");
  for (const JobSample& j : s.jobs)
    x.sample(job_labels(j, j.device), number(j.launches_per_second));
  x.family("gpushare_job_gate_held_seconds_total", "counter",
           "Time the job's launches spent held at the gate.");
  for (const JobSample& j : s.jobs)
    x.sample(job_labels(j, j.device), number(static_cast<double>(j.gate_held_ns) / 1e9));
  x.family("gpushare_job_gate_waits_total", "counter", "Launches that had to wait at the gate.");
  for (const JobSample& j : s.jobs) x.sample(job_labels(j, j.device), number(j.gate_waits));
  x.family("gpushare_job_paused", "gauge", "1 while the gate holds every launch of the job.");
  for (const JobSample& j : s.jobs) x.sample(job_labels(j, j.device), j.paused ? "1" : "0");
  x.family("gpushare_job_memory_used_bytes", "gauge",
           "Device memory the job declared, reservations included.");
  for (const JobSample& j : s.jobs)
    for (const JobMemorySample& m : j.memory)
      x.sample(job_labels(j, m.device), number(m.used_bytes));
  x.family("gpushare_job_memory_limit_bytes", "gauge",
           "Most the job may hold per device (absent: no limit).");
  for (const JobSample& j : s.jobs)
    for (const JobMemorySample& m : j.memory)
      if (m.limit_bytes) x.sample(job_labels(j, m.device), number(*m.limit_bytes));
  x.family("gpushare_job_memory_on_host_bytes", "gauge",
           "The job's swappable memory moved (or moving) to host memory.");
  for (const JobSample& j : s.jobs)
    for (const JobMemorySample& m : j.memory)
      x.sample(job_labels(j, m.device), number(m.on_host_bytes));
  x.family("gpushare_job_memory_unmoved_bytes", "gauge",
           "Swappable memory of a swapped-out job that the driver refused to move to host: it "
           "stays on the device.");
  for (const JobSample& j : s.jobs)
    for (const JobMemorySample& m : j.memory)
      x.sample(job_labels(j, m.device), number(m.unmoved_bytes));
  x.family("gpushare_job_swaps_total", "counter",
           "Completed moves of the job's swappable memory, by direction.");
  for (const JobSample& j : s.jobs) {
    x.sample(with(job_labels(j, j.device), "direction", "out"), number(j.swaps_out));
    x.sample(with(job_labels(j, j.device), "direction", "in"), number(j.swaps_in));
  }
  x.family("gpushare_job_swapped_bytes_total", "counter",
           "Bytes moved by the job's completed swaps, by direction.");
  for (const JobSample& j : s.jobs) {
    x.sample(with(job_labels(j, j.device), "direction", "out"), number(j.swapped_out_bytes));
    x.sample(with(job_labels(j, j.device), "direction", "in"), number(j.swapped_in_bytes));
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size();) {
    char c = value[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (size_t n = utf8_sequence(value, i); n > 0) {
      out.append(value.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
    ++i;
  }
  return out;
}

std::string format_metrics(const MetricsSnapshot& snapshot) {
  Exposition x;
  daemon_families(x, snapshot);
  device_families(x, snapshot);
  job_families(x, snapshot);
  return x.take();
}

}  // namespace gpushare::daemon
