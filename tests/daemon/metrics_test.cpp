// /metrics from a real gpushared with probes on the fake driver: served on TCP and on a Unix
// socket, values that follow the jobs, series that end when a job leaves, and off by default.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.h"
#include "metrics_http.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

std::string job_labels(const std::string& job, pid_t pid, const std::string& job_class) {
  return "{job_name=\"" + job + "\",pid=\"" + std::to_string(pid) + "\",uid=\"" +
         std::to_string(getuid()) + "\",class=\"" + job_class + "\",device=\"0\"}";
}

TEST(Metrics, ServedOnAUnixSocketFollowTheJobsAndDropThoseThatLeave) {
  TempDir dir;
  const std::string path = dir / "metrics.sock";
  Daemon daemon(dir, {{"production", {{{"job", "serve"}, {"uid", 0}}}}, {"metrics", {{"listen", path}}}});
  ASSERT_TRUE(daemon.start());
  ASSERT_TRUE(daemon.wait_for_log("metrics: serving /metrics on " + path)) << daemon.log();
  ChildProcess serve = start_probe(dir, daemon.socket, probe_as("serve", "production"));
  ChildProcess train = start_probe(dir, daemon.socket, probe_as("train", "production"));
  ASSERT_TRUE(serve.running() && train.running());
  ASSERT_EQ(serve.ask("alloc 4194304").rfind("ok", 0), 0u);
  ASSERT_EQ(serve.ask("launch 5 10"), "ok");
  ASSERT_EQ(train.ask("launch 3 10"), "ok");

  const std::string serve_series = job_labels("serve", serve.pid(), "production");
  const std::string train_series = job_labels("train", train.pid(), "opportunistic");
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = http_get_unix(path, "/metrics").value_or("");
        return sample_value(text, "gpushare_job_launches_total" + serve_series) == "5" &&
               sample_value(text, "gpushare_job_launches_total" + train_series) == "3";
      },
      5s))
      << text;
  EXPECT_EQ(sample_value(text, "gpushare_jobs"), "2");
  EXPECT_EQ(sample_value(text, "gpushare_job_memory_used_bytes" + serve_series), "4194304");
  EXPECT_EQ(sample_value(text, R"(gpushare_refusals_total{reason="production"})"), "1");
  EXPECT_EQ(
      sample_value(text, R"(gpushare_device_memory_used_bytes{device="0",class="production"})"),
      "4194304");
  EXPECT_EQ(sample_value(text, R"(gpushare_device_policy_info{device="0",policy="none"})"), "1");
  // `none` gives the opportunistic job an unlimited gate (from the scheduler's second tick on:
  // the first has no window to turn into a rate).
  ASSERT_TRUE(eventually(
      [&] {
        text = http_get_unix(path, "/metrics").value_or("");
        return sample_value(
                   text,
                   R"(gpushare_device_opportunistic_limit_launches_per_second{device="0"})") ==
               "+Inf";
      },
      5s))
      << text;

  // A refused ctl request and a reload are counted.
  ASSERT_EQ(run_ctl(daemon.socket, {"policy", "0", "tgs"}, 65534).exit_code, 1);
  ASSERT_EQ(run_ctl(daemon.socket, {"reload"}).exit_code, 0);
  ASSERT_TRUE(eventually(
      [&] {
        text = http_get_unix(path, "/metrics").value_or("");
        return sample_value(text, R"(gpushare_refusals_total{reason="policy"})") == "1" &&
               sample_value(text, R"(gpushare_config_reloads_total{result="success"})") == "1";
      },
      5s))
      << text;

  // The job that leaves takes its series with it.
  train.signal(SIGKILL);
  train.wait();
  ASSERT_TRUE(eventually(
      [&] {
        text = http_get_unix(path, "/metrics").value_or("");
        return sample_value(text, "gpushare_jobs") == "1";
      },
      5s))
      << text;
  EXPECT_EQ(text.find("job_name=\"train\""), std::string::npos) << text;
  EXPECT_TRUE(sample_value(text, "gpushare_job_launches_total" + serve_series));
}

TEST(Metrics, ServedOnTcpAndOffByDefault) {
  TempDir dir;
  int port = free_tcp_port();
  ASSERT_GT(port, 0);
  Daemon daemon(dir, {{"metrics", {{"listen", "127.0.0.1:" + std::to_string(port)}}}});
  ASSERT_TRUE(daemon.start());
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = http_get(port, "/metrics").value_or("");
        return sample_value(text, "gpushare_jobs") == "0";
      },
      5s))
      << daemon.log();
  EXPECT_NE(text.find("# TYPE gpushare_job_launches_total counter"), std::string::npos);
  EXPECT_FALSE(http_get(port, "/nothing-here"));

  // A scraper that stalls mid-request holds one HTTP worker (until its 5 s read timeout), never
  // the event loop: the daemon answers gpusharectl at once and other scrapes are served.
  int stalled = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(stalled, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const char partial[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";  // never finished
  ASSERT_GT(::send(stalled, partial, sizeof partial - 1, 0), 0);
  auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(run_ctl(daemon.socket, {"status"}).exit_code, 0);
  EXPECT_LT(seconds_since(asked), 4.0);  // well under the stalled request's 5 s
  EXPECT_EQ(sample_value(http_get(port, "/metrics").value_or(""), "gpushare_jobs"), "0");
  ::close(stalled);

  TempDir other;
  Daemon quiet(other);
  ASSERT_TRUE(quiet.start());
  EXPECT_FALSE(quiet.log_contains("metrics"));
}

}  // namespace
}  // namespace gpushare::testing
