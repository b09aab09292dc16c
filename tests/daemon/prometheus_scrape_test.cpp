// A real scrape: Debian's Prometheus server scrapes a test gpushared serving two fake-driver jobs
// every second; after two scrapes the series are asserted through Prometheus's query API
// (/api/v1/query), and `promtool check metrics` lints the exposition. Skipped only where the
// prometheus binary is absent (scripts/install-deps.sh installs it, so CI runs it).
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "harness.h"
#include "metrics_http.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

std::string tool(const char* name) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    std::string path = std::string(dir) + "/" + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// An instant query; the result vector ([] when Prometheus does not answer).
json query(int port, const std::string& promql) {
  std::string body = http_get(port, "/api/v1/query", {{"query", promql}}).value_or("");
  json reply = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded() || reply.value("status", "") != "success") return json::array();
  return reply["data"]["result"];
}

// The value of a query that must select exactly one series, as text ("" otherwise).
std::string value_of(int port, const std::string& promql) {
  json result = query(port, promql);
  return result.size() == 1 ? result[0]["value"][1].get<std::string>() : "";
}

TEST(PrometheusScrape, TheServerScrapesTheDaemonAndQueriesSeeTheJobs) {
  const std::string prometheus = tool("prometheus"), promtool = tool("promtool");
  if (prometheus.empty() || promtool.empty())
    GTEST_SKIP() << "prometheus/promtool not installed (scripts/install-deps.sh installs them)";
  auto started = std::chrono::steady_clock::now();
  TempDir dir;
  int metrics_port = free_tcp_port(), web_port = free_tcp_port();
  ASSERT_GT(metrics_port, 0);
  ASSERT_GT(web_port, 0);
  Daemon daemon(dir, {{"production", {{{"job", "serve-a"}, {"uid", 0}}}},
                      {"memory", {{"capacity", "1G"}}},
                      {"metrics", {{"listen", "127.0.0.1:" + std::to_string(metrics_port)}}}});
  ASSERT_TRUE(daemon.start());
  // Two jobs: a production one, and one whose name needs escaping that asked for production and
  // was refused (no rule matches it).
  const std::string odd = "train \"b\"";
  ChildProcess serve = start_probe(dir, daemon.socket, probe_as("serve-a", "production"));
  ChildProcess train = start_probe(dir, daemon.socket, probe_as(odd, "production"));
  ASSERT_TRUE(serve.running() && train.running());
  ASSERT_EQ(serve.ask("alloc 67108864").rfind("ok", 0), 0u);
  ASSERT_EQ(train.ask("alloc 33554432").rfind("ok", 0), 0u);
  ASSERT_EQ(serve.ask("launch 10 10"), "ok");
  ASSERT_EQ(train.ask("launch 7 10"), "ok");

  std::ofstream(dir / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: gpushared\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << metrics_port << "']\n";
  ChildProcess server = ChildProcess::start(
      {prometheus, "--config.file=" + (dir / "prometheus.yml"),
       "--storage.tsdb.path=" + (dir / "tsdb"),
       "--web.listen-address=127.0.0.1:" + std::to_string(web_port), "--log.level=warn"},
      {{"PATH", "/usr/bin:/bin"}, {"HOME", dir.path}}, dir / "prometheus.log");
  ASSERT_TRUE(server.running());

  // Two scrapes of the target, both successful.
  bool scraped = eventually(
      [&] {
        std::string scrapes = value_of(web_port, R"(count_over_time(up{job="gpushared"}[1m]))");
        return !scrapes.empty() && std::stod(scrapes) >= 2 &&
               value_of(web_port, R"(min_over_time(up{job="gpushared"}[1m]))") == "1";
      },
      15s, 200ms);
  ASSERT_TRUE(scraped) << read_file(dir / "prometheus.log") << query(web_port, R"(up)").dump();

  const std::string serve_sel = R"(job_name="serve-a",class="production",device="0",pid=")" +
                                std::to_string(serve.pid()) + "\"";
  const std::string train_sel =
      R"(job_name="train \"b\"",class="opportunistic",pid=")" + std::to_string(train.pid()) + "\"";
  EXPECT_EQ(value_of(web_port, "gpushare_jobs"), "2");
  EXPECT_EQ(value_of(web_port, "gpushare_job_launches_total{" + serve_sel + "}"), "10");
  EXPECT_EQ(value_of(web_port, "gpushare_job_launches_total{" + train_sel + "}"), "7");
  EXPECT_EQ(value_of(web_port, "gpushare_job_memory_used_bytes{" + serve_sel + "}"), "67108864");
  EXPECT_EQ(value_of(web_port, "gpushare_job_memory_used_bytes{" + train_sel + "}"), "33554432");
  EXPECT_EQ(value_of(web_port, R"(gpushare_device_memory_used_bytes{class="opportunistic"})"),
            "33554432");
  EXPECT_EQ(value_of(web_port, R"(gpushare_device_memory_capacity_bytes{device="0"})"),
            "1073741824");
  EXPECT_EQ(value_of(web_port, R"(gpushare_refusals_total{reason="production"})"), "1");
  EXPECT_EQ(value_of(web_port, R"(gpushare_device_policy_info{device="0",policy="none"})"), "1");
  // Every series carries Prometheus's own job label; ours is job_name, so nothing was renamed.
  EXPECT_EQ(query(web_port, R"({exported_job!=""})").size(), 0u);

  // promtool's lint of the exposition as served.
  std::string text = http_get(metrics_port, "/metrics").value_or("");
  ASSERT_FALSE(text.empty());
  std::ofstream(dir / "metrics.txt") << text;
  std::string command = promtool + " check metrics < " + (dir / "metrics.txt") + " > " +
                        (dir / "promtool.out") + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << read_file(dir / "promtool.out");

  server.signal(SIGTERM);
  EXPECT_NE(server.wait(10s), -1);
  std::printf("[ measured ] scrape test took %.1f s\n", seconds_since(started));
}

}  // namespace
}  // namespace gpushare::testing
