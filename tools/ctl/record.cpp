#include "record.h"

#include <chrono>
#include <fstream>
#include <thread>

#include "daemon_client.h"
#include "gpushare/protocol/ctl.h"
#include "timeline.h"

namespace gpushare::ctl {

using nlohmann::json;

std::string record(const std::string& socket_path, double seconds, const std::string& path) {
  Exchange status =
      ask_daemon(socket_path, {{protocol::ctl::kCommand, protocol::ctl::command::kStatus}});
  if (status.outcome != Exchange::Outcome::replied) return status.error;
  if (!status.reply.value("ok", false))
    return status.reply.value("error", std::string("the daemon refused `status`"));
  // One sample per daemon tick: the gates change no more often than that.
  const auto period = std::chrono::milliseconds(
      std::max<int64_t>(10, status.reply["daemon"].value("tick_ms", int64_t{50})));
  std::vector<Sample> samples;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  for (auto next = start; std::chrono::steady_clock::now() <= end; next += period) {
    Exchange jobs =
        ask_daemon(socket_path, {{protocol::ctl::kCommand, protocol::ctl::command::kJobs}});
    Exchange devices =
        ask_daemon(socket_path, {{protocol::ctl::kCommand, protocol::ctl::command::kStatus}});
    if (jobs.outcome != Exchange::Outcome::replied) return jobs.error;
    if (devices.outcome != Exchange::Outcome::replied) return devices.error;
    Sample s;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    s.jobs = jobs.reply.value("jobs", json::array());
    s.devices = devices.reply.value("devices", json::array());
    samples.push_back(std::move(s));
    std::this_thread::sleep_until(next + period);
  }
  std::ofstream out(path);
  out << build_trace(samples).dump() << "\n";
  out.close();
  if (!out) return "cannot write " + path;
  return "";
}

}  // namespace gpushare::ctl
