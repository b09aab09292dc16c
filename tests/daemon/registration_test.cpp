// Registration end to end: real gpushared, real shim (in probe processes on the fake driver),
// real gpusharectl.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "shim_preload.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

TEST(Registration, ShimJobsAppearInJobsWithTheirClassDeviceRateAndMemory) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"uid", 0}, {"job", "serve-*"}}}}});
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ChildProcess serving = start_probe(dir, daemon.socket, probe_as("serve-a", "production"));
  ChildProcess training = start_probe(dir, daemon.socket, probe_as("train-b"));
  ASSERT_TRUE(serving.running() && training.running());
  ASSERT_EQ(training.ask("alloc 3145728").rfind("ok ", 0), 0u);
  ASSERT_EQ(training.ask("launch 200 0"), "ok");

  json train;
  ASSERT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon.socket, training.pid());
        if (j) train = *j;
        return j && train["memory_bytes"] == 3145728 && train["launches"].get<uint64_t>() >= 200;
      },
      5s))
      << train.dump();
  auto serve = job_with_pid(daemon.socket, serving.pid());
  ASSERT_TRUE(serve);
  EXPECT_EQ((*serve)["job"], "serve-a");
  EXPECT_EQ((*serve)["class"], "production");
  EXPECT_EQ(train["job"], "train-b");
  EXPECT_EQ(train["class"], "opportunistic");
  EXPECT_EQ(train["uid"], getuid());
  EXPECT_EQ(train["client_pid"], training.pid());
  EXPECT_EQ(train["devices"], json::array({0}));  // where its memory is

  // The human table shows the same, one line per job.
  CtlResult table = run_ctl(daemon.socket, {"jobs"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("serve-a"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("3.0 MiB"), std::string::npos) << table.out;
  EXPECT_TRUE(daemon.log_contains("register pid=" + std::to_string(serving.pid())));
}

// Two cudart-style workloads (tests/clients/client_workload) share the fake device: `jobs` shows
// each one's memory and a kernel rate that agrees with the rate the job measured itself.
TEST(Registration, KernelsPerSecondAgreesWithWhatTheJobsMeasured) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"uid", 0}, {"job", "serve"}}}}});
  ASSERT_TRUE(daemon.start());
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin:/bin"},
      {"LD_PRELOAD", shim_preload(Artefacts::shim())},
      {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
      {"GPUSHARE_SOCKET", daemon.socket},
      {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"},
  };
  std::vector<std::string> argv = {Artefacts::workload(), "--kernel-us", "500", "--seconds", "3",
                                   "--alloc-bytes",       "4194304"};
  env["GPUSHARE_JOB"] = "serve";
  env["GPUSHARE_PRIORITY"] = "production";
  ChildProcess serve = ChildProcess::start(argv, env, dir / "serve.stderr");
  env["GPUSHARE_JOB"] = "train";
  env["GPUSHARE_PRIORITY"] = "opportunistic";
  ChildProcess train = ChildProcess::start(argv, env, dir / "train.stderr");
  std::map<pid_t, double> daemon_rate;
  // Sample `jobs` while both run; keep each job's last rate.
  eventually(
      [&] {
        for (const auto& j : list_jobs(daemon.socket)) {
          // The workload allocates before its first launch.
          if (j["launches"].get<uint64_t>() > 0) {
            EXPECT_EQ(j["memory_bytes"], 4194304) << j.dump();
          }
          EXPECT_EQ(j["class"], j["job"] == "serve" ? "production" : "opportunistic");
          if (j["kernels_per_s"].get<double>() > 0)
            daemon_rate[j["pid"].get<pid_t>()] = j["kernels_per_s"];
        }
        return false;
      },
      2500ms, 100ms);
  for (ChildProcess* job : {&serve, &train}) {
    SCOPED_TRACE(job == &serve ? "serve" : "train");
    json measured = json::parse(job->read_line(20s).value_or("{}"), nullptr, false);
    ASSERT_TRUE(measured.contains("kernels_per_s")) << measured.dump();
    double own = measured["kernels_per_s"].get<double>();
    ASSERT_TRUE(daemon_rate.count(job->pid()));
    double seen = daemon_rate[job->pid()];
    std::printf("[ measured ] job's own rate %.0f kernels/s, daemon's %.0f kernels/s\n", own, seen);
    EXPECT_GT(seen, own * 0.5);
    EXPECT_LT(seen, own * 2.0);
  }
}

TEST(Registration, IdentityComesFromPeerCredentialsNotFromTheMessage) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient liar;
  ASSERT_TRUE(liar.connect(daemon.socket));
  int memfd = -1;
  // Claims to be pid 1.
  auto reply = liar.register_job("liar", protocol::JobClass::opportunistic, 1, &memfd);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 0u);
  EXPECT_GE(memfd, 0);
  auto job = job_with_pid(daemon.socket, getpid());
  ASSERT_TRUE(job) << list_jobs(daemon.socket).dump();
  EXPECT_EQ((*job)["job"], "liar");
  EXPECT_EQ((*job)["client_pid"], 1);  // shown, never used as identity
  EXPECT_FALSE(job_with_pid(daemon.socket, 1));
  EXPECT_EQ((*job)["uid"], getuid());
  ::close(memfd);
}

TEST(Registration, ProductionClaimsAreRefusedByTheRulesAndLogged) {
  TempDir dir;
  // Only uid 4242 may run production: root's claim is refused.
  Daemon daemon(dir, {{"production", {{{"uid", 4242}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("wants-prod", "production"));
  ASSERT_TRUE(probe.running());
  auto job = job_with_pid(daemon.socket, probe.pid());
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["class"], "opportunistic");
  EXPECT_EQ((*job)["requested_class"], "production");
  EXPECT_EQ(probe.ask("block").substr(0, 6), "block ");
  EXPECT_NE(probe.ask("block").find("opportunistic"), std::string::npos);
  EXPECT_TRUE(daemon.wait_for_log("refuse production pid=" + std::to_string(probe.pid())));
}

TEST(Registration, SixtyFourClientsRegisterAtOnce) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  constexpr int kClients = 64;
  std::vector<ChildProcess> probes;
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin:/bin"},
      {"LD_PRELOAD", shim_preload(Artefacts::shim())},
      {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
      {"GPUSHARE_SOCKET", daemon.socket},
      {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"},
  };
  // Start them all first, then send every "init" before reading any answer: the registrations
  // reach the daemon together.
  for (int i = 0; i < kClients; ++i) {
    env["GPUSHARE_JOB"] = "many-" + std::to_string(i);
    probes.push_back(ChildProcess::start({Artefacts::probe()}, env, dir / "many.stderr"));
  }
  for (auto& p : probes) ASSERT_EQ(p.read_line(30s).value_or("").rfind("ready", 0), 0u);
  auto start = std::chrono::steady_clock::now();
  for (auto& p : probes) ASSERT_TRUE(p.send_line("init"));
  for (auto& p : probes) ASSERT_EQ(p.read_line(30s).value_or(""), "ok");
  size_t listed = 0;
  eventually([&] { return (listed = list_jobs(daemon.socket).size()) == kClients; }, 10s, 50ms);
  EXPECT_EQ(listed, static_cast<size_t>(kClients));
  std::printf("[ measured ] %d shims initialised and registered in %.3f s\n", kClients,
              seconds_since(start));
  std::set<std::string> names;
  for (const auto& j : list_jobs(daemon.socket)) names.insert(j["job"].get<std::string>());
  EXPECT_EQ(names.size(), static_cast<size_t>(kClients));
}

}  // namespace
}  // namespace gpushare::testing
