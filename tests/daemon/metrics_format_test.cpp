// /metrics's exposition (daemon/metrics_format.cpp) and its config key, without a daemon: names,
// labels, escaping of client-chosen job names, and that a job that left has no series. Also the
// device inventory behind `gpusharectl policy`'s check.
#include "metrics_format.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "config.h"
#include "device_inventory.h"

namespace gpushare::daemon {
namespace {

MetricsSnapshot two_jobs() {
  MetricsSnapshot s;
  s.version = "0.1.0";
  s.uptime_seconds = 12.5;
  s.clients = 3;
  s.protocol_errors = 1;
  s.counters.refused(Refusal::production);
  s.counters.refused(Refusal::alloc);
  s.counters.refused(Refusal::alloc);
  s.counters.tick_overruns = 4;
  s.counters.reloads = 2;
  s.counters.failed_reloads = 1;
  DeviceSample d;
  d.device = 0;
  d.policy = "tgs";
  d.opportunistic_limit_per_second = std::numeric_limits<double>::infinity();
  d.production_progress = 0.93;
  d.capacity_bytes = uint64_t{16} << 30;
  d.production_bytes = 1 << 20;
  d.opportunistic_bytes = 2 << 20;
  s.devices.push_back(d);
  JobSample serve;
  serve.job = "serve";
  serve.pid = 100;
  serve.uid = 0;
  serve.job_class = "production";
  serve.launches = 1000;
  serve.completed_launches = 990;
  serve.gate_held_ns = 1500000000;
  serve.memory.push_back({0, 1 << 20, std::nullopt, 0});
  s.jobs.push_back(serve);
  JobSample train;
  train.job = "train \"b\"\\x\ny";
  train.pid = 101;
  train.uid = 1000;
  train.job_class = "opportunistic";
  train.launches = 7;
  train.paused = true;
  train.memory.push_back({0, 2 << 20, uint64_t{4} << 20, 1 << 20, 1 << 19});
  train.swaps_out = 1;
  train.swapped_out_bytes = 1 << 20;
  s.jobs.push_back(train);
  return s;
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l == line) return true;
  return false;
}

TEST(MetricsFormat, ShowsEveryFamilyWithItsValues) {
  std::string text = format_metrics(two_jobs());
  const std::string serve = R"(job_name="serve",pid="100",uid="0",class="production",device="0")";
  const std::string train =
      R"(job_name="train \"b\"\\x\ny",pid="101",uid="1000",class="opportunistic",device="0")";
  for (const std::string& line : {
           std::string(R"(gpushare_build_info{version="0.1.0"} 1)"),
           std::string("gpushare_uptime_seconds 12.5"),
           std::string("gpushare_clients 3"),
           std::string("gpushare_jobs 2"),
           std::string(R"(gpushare_refusals_total{reason="production"} 1)"),
           std::string(R"(gpushare_refusals_total{reason="alloc"} 2)"),
           std::string(R"(gpushare_refusals_total{reason="max_clients"} 0)"),
           std::string("gpushare_protocol_errors_total 1"),
           std::string("gpushare_tick_overruns_total 4"),
           std::string(R"(gpushare_config_reloads_total{result="success"} 2)"),
           std::string(R"(gpushare_config_reloads_total{result="failure"} 1)"),
           std::string(R"(gpushare_device_policy_info{device="0",policy="tgs"} 1)"),
           std::string(
               R"(gpushare_device_opportunistic_limit_launches_per_second{device="0"} +Inf)"),
           std::string(R"(gpushare_device_production_progress_ratio{device="0"} 0.93)"),
           std::string(R"(gpushare_device_memory_capacity_bytes{device="0"} 17179869184)"),
           std::string(
               R"(gpushare_device_memory_used_bytes{device="0",class="production"} 1048576)"),
           "gpushare_job_launches_total{" + serve + "} 1000",
           "gpushare_job_launches_total{" + train + "} 7",
           "gpushare_job_completed_launches_total{" + serve + "} 990",
           "gpushare_job_gate_held_seconds_total{" + serve + "} 1.5",
           "gpushare_job_paused{" + train + "} 1",
           "gpushare_job_memory_used_bytes{" + train + "} 2097152",
           "gpushare_job_memory_limit_bytes{" + train + "} 4194304",
           "gpushare_job_memory_on_host_bytes{" + train + "} 1048576",
           "gpushare_job_memory_unmoved_bytes{" + train + "} 524288",
           "gpushare_job_swaps_total{" + train + R"(,direction="out"} 1)",
           "gpushare_job_swapped_bytes_total{" + train + R"(,direction="out"} 1048576)",
       })
    EXPECT_TRUE(has_line(text, line)) << "missing: " << line << "\n" << text;
  // Absent where unknown: a job without a limit, a job without completion marks.
  EXPECT_EQ(text.find("gpushare_job_memory_limit_bytes{" + serve), std::string::npos);
  EXPECT_EQ(text.find("gpushare_job_completed_launches_total{" + train), std::string::npos);
}

// The exposition's grammar, as far as a scraper needs it: each family announced by HELP and TYPE
// once, before its samples; counters end in _total; every sample line parses.
TEST(MetricsFormat, EveryLineFollowsTheTextFormat) {
  std::string text = format_metrics(two_jobs());
  const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\["\\n])*",?)*\})? )"
      R"(([-+]?[0-9.e+-]+|\+Inf|-Inf|NaN)$)");
  std::set<std::string> typed;
  std::string current, type;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(typed.insert(current).second) << "announced twice: " << current;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      type = line.substr(line.rfind(' ') + 1);
      if (type == "counter") {
        EXPECT_TRUE(current.ends_with("_total")) << current;
      }
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
    EXPECT_EQ(m[1].str(), current) << "a sample outside its family: " << line;
  }
  EXPECT_GE(typed.size(), 20u);
}

TEST(MetricsFormat, AJobThatLeftHasNoSeries) {
  MetricsSnapshot s = two_jobs();
  s.jobs.pop_back();
  std::string text = format_metrics(s);
  EXPECT_EQ(text.find("train"), std::string::npos);
  EXPECT_NE(text.find(R"(job_name="serve")"), std::string::npos);
  // An empty daemon still announces every family (a dashboard sees the names first).
  EXPECT_NE(format_metrics(MetricsSnapshot{}).find("# TYPE gpushare_job_launches_total counter"),
            std::string::npos);
}

TEST(MetricsFormat, LabelValuesAreEscapedAndValidUtf8) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value(R"(a"b\c)"), R"(a\"b\\c)");
  EXPECT_EQ(escape_label_value("a\nb"), "a\\nb");
  EXPECT_EQ(escape_label_value("h\xC3\xA9"), "h\xC3\xA9");                // é stays
  EXPECT_EQ(escape_label_value("x\xFFy"), "x\xEF\xBF\xBDy");              // a stray byte
  EXPECT_EQ(escape_label_value("\xC3"), "\xEF\xBF\xBD");                  // a cut sequence
  EXPECT_EQ(escape_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
}

TEST(MetricsConfig, ListenTakesTcpOrAUnixPathAndIsOffByDefault) {
  EXPECT_FALSE(parse_config("{}").config->metrics.listen);
  auto tcp = parse_config(R"({"metrics": {"listen": "127.0.0.1:9450"}})");
  ASSERT_TRUE(tcp.config) << tcp.error_text();
  EXPECT_EQ(tcp.config->metrics.listen->host, "127.0.0.1");
  EXPECT_EQ(tcp.config->metrics.listen->port, 9450);
  auto v6 = parse_config(R"({"metrics": {"listen": "[::1]:9450"}})");
  ASSERT_TRUE(v6.config) << v6.error_text();
  EXPECT_EQ(v6.config->metrics.listen->host, "::1");
  auto path = parse_config(R"({"metrics": {"listen": "/run/gpushare/metrics.sock"}})");
  ASSERT_TRUE(path.config) << path.error_text();
  EXPECT_EQ(path.config->metrics.listen->unix_path, "/run/gpushare/metrics.sock");
  for (const char* bad :
       {R"({"metrics": {"listen": "9450"}})", R"({"metrics": {"listen": "127.0.0.1:99999"}})",
        R"({"metrics": {"listen": "127.0.0.1:"}})", R"({"metrics": {"listen": 9450}})",
        R"({"metrics": {"port": 9450}})", R"({"metrics": "127.0.0.1:9450"})"}) {
    auto r = parse_config(bad);
    EXPECT_FALSE(r.config) << bad;
    EXPECT_NE(r.error_text().find("metrics"), std::string::npos) << r.error_text();
  }
}

}  // namespace
}  // namespace gpushare::daemon

namespace gpushare::daemon {
namespace {

// `gpusharectl policy N`: which device indices exist (daemon/device_inventory.cpp).
TEST(DeviceInventory, NvidiaNodesAreDevicesAndUnknownIndicesAreRefused) {
  char dir[] = "/tmp/gpushare-dev-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string d = dir;
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps", "null"})
    std::ofstream(d + "/" + name) << "";
  EXPECT_EQ(nvidia_device_nodes(d), (std::set<int>{0, 1}));
  EXPECT_EQ(unknown_device(2, {0, 1}, {}), "device 2 does not exist (devices: 0, 1)");
  EXPECT_EQ(unknown_device(1, {0, 1}, {}), std::nullopt);
  EXPECT_EQ(unknown_device(3, {}, {3}), std::nullopt);  // reported by a shim
  EXPECT_EQ(unknown_device(7, {}, {}), std::nullopt);   // nothing known: nothing to check against
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace gpushare::daemon
