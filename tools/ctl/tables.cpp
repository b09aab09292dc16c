#include "tables.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace gpushare::ctl {
namespace {

using nlohmann::json;
using Row = std::vector<std::string>;

// Left-aligned columns, two spaces apart.
std::string table(const std::vector<Row>& rows) {
  std::vector<size_t> width;
  for (const Row& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const Row& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i)
      line += r[i] + (i + 1 < r.size() ? std::string(width[i] - r[i].size() + 2, ' ') : "");
    out += line + "\n";
  }
  return out;
}

std::string number(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string devices_text(const json& devices) {
  if (!devices.is_array() || devices.empty()) return "any";
  std::string text;
  for (const auto& d : devices) text += (text.empty() ? "" : ",") + std::to_string(d.get<int>());
  return text;
}

// {"target": 0.9, "in_flight": 2} -> "target=0.9,in_flight=2" (the form `policy` takes); "-" if
// none.
std::string parameters_text(const json& parameters) {
  std::string text;
  for (const auto& [name, value] : parameters.items()) {
    bool whole =
        value.is_number_float() && value.get<double>() == static_cast<int64_t>(value.get<double>());
    text += (text.empty() ? "" : ",") + name + "=" +
            (whole ? std::to_string(static_cast<int64_t>(value.get<double>())) : value.dump());
  }
  return text.empty() ? "-" : text;
}

}  // namespace

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) value /= 1024, ++unit;
  return unit == 0 ? std::to_string(bytes) + " B" : number(value, 1) + " " + units[unit];
}

std::string render_status(const json& reply) {
  const json& d = reply.at("daemon");
  std::string out;
  out += "gpushared " + d.value("version", std::string("?")) + " (protocol " +
         std::to_string(d.value("protocol", 0)) + "), pid " + std::to_string(d.value("pid", 0)) +
         ", up " + number(d.value("uptime_s", 0.0), 0) + " s\n";
  out += "config  " + d.value("config", std::string()) + "\n";
  out += "socket  " + d.value("socket", std::string()) + "\n";
  out += "jobs    " + std::to_string(d.value("jobs", 0)) + " (" +
         std::to_string(d.value("production_jobs", 0)) + " production), " +
         std::to_string(d.value("clients", 0)) + " connections, tick " +
         std::to_string(d.value("tick_ms", 0)) + " ms, default policy " +
         d.value("default_policy", std::string()) + "\n";
  out += reply.contains("mps") ? render_mps(reply["mps"])
                               : "mps     unknown (the daemon does not report it)\n";
  out += std::string("memory  oversubscription ") +
         (d.value("oversubscribe", false) ? "on (opportunistic memory may move to host)" : "off") +
         "\n";
  const json& devices = reply.value("devices", json::array());
  if (!devices.empty()) {
    std::vector<Row> rows = {
        {"DEVICE", "POLICY", "JOBS", "KERNELS/S", "MEMORY", "CAPACITY", "PARAMETERS"}};
    for (const auto& dev : devices) {
      const json capacity = dev.value("capacity_bytes", json());
      rows.push_back(
          {std::to_string(dev.value("device", 0)), dev.value("policy", std::string()),
           std::to_string(dev.value("jobs", 0)), number(dev.value("kernels_per_s", 0.0), 1),
           human_bytes(dev.value("memory_bytes", uint64_t{0})),
           capacity.is_number_unsigned() ? human_bytes(capacity.get<uint64_t>()) : "unknown",
           parameters_text(dev.value("parameters", json::object()))});
    }
    out += "\n" + table(rows);
    // Rotating residency (docs/memory.md): whose turn it is, the cycle, and who is prefetched.
    for (const auto& dev : devices) {
      const json rotation = dev.value("rotation", json());
      if (!rotation.is_object()) continue;
      auto id_text = [](const json& id) {
        return id.is_number_unsigned() ? std::to_string(id.get<uint64_t>()) : std::string("none");
      };
      std::string order;
      for (const auto& id : rotation.value("order", json::array()))
        order += (order.empty() ? "" : ",") + id_text(id);
      out += "rotation device " + std::to_string(dev.value("device", 0)) + ": turn of job id " +
             id_text(rotation.value("current", json())) + ", order " + order + ", prefetch " +
             id_text(rotation.value("prefetch", json())) + " (" +
             human_bytes(rotation.value("prefetch_bytes", uint64_t{0})) + "), budget " +
             human_bytes(rotation.value("budget_bytes", uint64_t{0})) + "\n";
    }
    // What each device's policy believes: its estimate of production's speed, and its own account
    // (the concurrency budget: each mode's cost to production ± its error, gain and share).
    for (const auto& dev : devices) {
      const json state = dev.value("policy_state", json());
      if (!state.is_object()) continue;
      const json progress = state.value("production_progress", json());
      const json explanation = state.value("explanation", json());
      if (!progress.is_number() && !explanation.is_string()) continue;
      std::string line = "policy device " + std::to_string(dev.value("device", 0)) + ":";
      if (progress.is_number())
        line += " production at " + number(progress.get<double>(), 3) + " of its solo speed";
      if (progress.is_number() && explanation.is_string()) line += ";";
      if (explanation.is_string()) line += " " + explanation.get<std::string>();
      out += line + "\n";
    }
  }
  return out;
}

std::string render_mps(const json& mps) {
  std::string mode = mps.value("mode", std::string("?"));
  std::string state = mps.value("state", std::string("?"));
  std::string pipe = mps.value("pipe_directory", std::string());
  std::string error = mps.contains("error") && mps["error"].is_string()
                          ? mps["error"].get<std::string>()
                          : std::string();
  std::string line = "mps     ";
  if (mode == "off") return line + "off\n";
  if (mode == "external") {
    line += "external " + pipe;
    if (mps.value("available", false))
      line += " (control daemon of uid " + std::to_string(mps.value("owner_uid", 0)) + ")";
    else
      line += ": " + error;
  } else if (state == "running") {
    line += "running, pid " + std::to_string(mps.value("pid", 0)) + " (auto, pipe " + pipe + ")";
  } else {
    line += state;
    if (!error.empty()) line += ": " + error;
    if (mps.contains("retry_in_s"))
      line += " (retry in " + std::to_string(mps.value("retry_in_s", 0)) + " s)";
  }
  if (mps.contains("thread_percentage"))
    line += ", opportunistic threads " + std::to_string(mps.value("thread_percentage", 0)) + "%";
  return line + "\n";
}

namespace {
// The daemon leaves out what would not fit one reply frame and says how much (docs/daemon.md).
std::string omitted_text(const json& reply) {
  uint64_t omitted = reply.value("jobs_omitted", uint64_t{0});
  if (!omitted) return "";
  return "(" + std::to_string(omitted) + " more jobs not shown: the reply is at its size limit)\n";
}
}  // namespace

namespace {
// A key of a job that is a string or null (a job outside a pod): "-" for null.
std::string text_or_dash(const json& job, const char* key) {
  return job.contains(key) && job[key].is_string() ? job[key].get<std::string>() : "-";
}
}  // namespace

std::string render_jobs(const json& reply) {
  std::vector<Row> rows = {{"PID", "JOB", "CLASS", "DEVICE", "KERNELS/S", "MEMORY", "UID"}};
  // Pod columns only where some job runs in a pod (docs/daemon.md, "Containers"); the container
  // id shortened to 12 digits, as crictl and docker show it.
  bool pods = false;
  for (const auto& j : reply.at("jobs")) pods = pods || text_or_dash(j, "pod_uid") != "-";
  if (pods) rows[0].insert(rows[0].end(), {"POD", "CONTAINER", "QOS"});
  for (const auto& j : reply.at("jobs")) {
    std::string job_class = j.value("class", std::string());
    if (j.value("requested_class", job_class) != job_class)
      job_class += " (asked " + j.value("requested_class", std::string()) + ")";
    rows.push_back(
        {std::to_string(j.value("pid", 0)), j.value("job", std::string()), job_class,
         devices_text(j.value("devices", json::array())), number(j.value("kernels_per_s", 0.0), 1),
         human_bytes(j.value("memory_bytes", uint64_t{0})), std::to_string(j.value("uid", 0))});
    if (pods)
      rows.back().insert(rows.back().end(), {text_or_dash(j, "pod_uid"),
                                             text_or_dash(j, "container_id").substr(0, 12),
                                             text_or_dash(j, "qos")});
  }
  if (rows.size() == 1) return "no jobs registered\n";
  return table(rows) + omitted_text(reply);
}

std::string render_set_priority(const json& reply) {
  std::string out;
  for (const auto& j : reply.at("jobs")) {
    std::string from = j.value("from", std::string()), to = j.value("to", std::string());
    out += "pid " + std::to_string(j.value("pid", 0)) + " (" + j.value("job", std::string()) +
           "): " + (from == to ? "already " + to : from + " -> " + to) + "\n";
  }
  return out;
}

std::string render_policy(const json& reply) {
  std::string parameters = parameters_text(reply.value("parameters", json::object()));
  return "device " + std::to_string(reply.value("device", 0)) + ": " +
         reply.value("from", std::string()) + " -> " + reply.value("policy", std::string()) +
         (parameters == "-" ? "" : " " + parameters) + "\n";
}

namespace {
std::string limit_text(const json& v) {
  return v.is_number_unsigned() ? human_bytes(v.get<uint64_t>()) : "none";
}
}  // namespace

std::string render_jobs_memory(const json& reply) {
  std::vector<Row> rows = {{"PID", "JOB", "CLASS", "MEMORY", "LIMIT", "STATE", "SWAPS OUT/IN"}};
  std::string sites;
  for (const auto& j : reply.at("jobs")) {
    const json& m = j.value("memory_state", json::object());
    rows.push_back({std::to_string(j.value("pid", 0)), j.value("job", std::string()),
                    j.value("class", std::string()),
                    human_bytes(j.value("memory_bytes", uint64_t{0})),
                    limit_text(m.value("limit_bytes", json())), m.value("state", std::string()),
                    std::to_string(m.value("swaps_out", 0)) + "/" +
                        std::to_string(m.value("swaps_in", 0))});
    for (const auto& s : m.value("sites", json::array()))
      sites += "  " + std::to_string(j.value("pid", 0)) + "  " +
               human_bytes(s.value("bytes", uint64_t{0})) + " in " +
               std::to_string(s.value("allocations", 0)) + " allocations  " +
               s.value("where", std::string()) + "\n";
  }
  if (rows.size() == 1) return "no jobs registered\n";
  if (!sites.empty()) sites = "\nallocation sites (GPUSHARE_TRACE_ALLOC=1):\n" + sites;
  return table(rows) + omitted_text(reply) + sites;
}

std::string render_set_limit(const json& reply) {
  std::string out;
  for (const auto& j : reply.at("jobs"))
    out += "pid " + std::to_string(j.value("pid", 0)) + " (" + j.value("job", std::string()) +
           "): limit " + limit_text(j.value("from", json())) + " -> " +
           limit_text(j.value("to", json())) + "\n";
  return out;
}

}  // namespace gpushare::ctl
