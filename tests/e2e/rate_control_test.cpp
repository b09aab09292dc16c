// Rate control end to end: a production and an opportunistic process share the fake
// driver's one engine, with the real daemon, the real shim and the real ctl. Every assertion is a
// ratio measured in the same test (normalized throughput NT = shared rate / rate alone).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "shim_preload.h"

using namespace gpushare::testing;

namespace {

struct Workload {
  unsigned kernel_us = 2000;
  unsigned gap_us = 0;
  double settle_s = 0;
  double seconds = 3;
  unsigned event_delay_us = 0;  // the fake driver's events complete this late (a modelled queue)
  std::string report = {};      // GPUSHARE_REPORT: the shim's exit report (empty: none)
};

// Starts client_workload under the shim; `socket` empty means no daemon (pass-through).
ChildProcess start_workload(const TempDir& dir, const std::string& device_file,
                            const std::string& socket, const std::string& job,
                            const std::string& priority, const Workload& w) {
  std::vector<std::string> argv = {CLIENT_WORKLOAD_PATH,
                                   "--kernel-us", std::to_string(w.kernel_us),
                                   "--gap-us", std::to_string(w.gap_us),
                                   "--settle-seconds", std::to_string(w.settle_s),
                                   "--seconds", std::to_string(w.seconds)};
  std::map<std::string, std::string> env = {
      {"LD_PRELOAD", gpushare::testing::shim_preload(SHIM_PATH)},
      {"LD_LIBRARY_PATH", FAKE_DRIVER_DIR},
      {"GPUSHARE_FAKE_DEVICE_FILE", device_file},
      {"GPUSHARE_SOCKET", socket.empty() ? dir / "no-daemon.sock" : socket},
      {"GPUSHARE_JOB", job},
      {"GPUSHARE_PRIORITY", priority},
      {"GPUSHARE_QUIET", "1"},
      {"PATH", "/usr/bin:/bin"}};
  if (w.event_delay_us > 0) env["GPUSHARE_FAKE_EVENT_DELAY_US"] = std::to_string(w.event_delay_us);
  if (!w.report.empty()) env["GPUSHARE_REPORT"] = w.report;
  return ChildProcess::start(argv, env, dir / (job + ".err"));
}

double rate_of(ChildProcess& p, const TempDir& dir, const std::string& job) {
  std::optional<std::string> line = p.read_line(60s);
  EXPECT_TRUE(line) << job << " printed nothing; stderr: " << read_file(dir / (job + ".err"));
  if (!line) return 0;
  nlohmann::json j = nlohmann::json::parse(*line, nullptr, false);
  EXPECT_TRUE(j.contains("kernels_per_s")) << job << ": " << *line;
  return j.value("kernels_per_s", 0.0);
}

double alone(const TempDir& dir, const std::string& device_file, const std::string& job,
             const Workload& w) {
  ChildProcess p = start_workload(dir, device_file, "", job, "opportunistic", w);
  return rate_of(p, dir, job);
}

struct Pair {
  double production = 0;
  double opportunistic = 0;
};

Pair together(const TempDir& dir, const std::string& device_file, const std::string& socket,
              const Workload& production, const Workload& opportunistic) {
  ChildProcess p = start_workload(dir, device_file, socket, "prod", "production", production);
  ChildProcess o = start_workload(dir, device_file, socket, "opp", "opportunistic", opportunistic);
  Pair r;
  r.production = rate_of(p, dir, "prod");
  r.opportunistic = rate_of(o, dir, "opp");
  // They exit after their line; waiting lets the shim write its exit report (GPUSHARE_REPORT).
  p.wait(10s);
  o.wait(10s);
  return r;
}

nlohmann::json config_with_policy(const std::string& policy) {
  // root may claim production in these tests; the policy runs on device 0.
  return {{"production", {{{"uid", 0}}}}, {"policy", {{"default", policy}}}, {"tick_ms", 50}};
}

}  // namespace

// Two saturating jobs: without a daemon the engine is shared about half and half; with `tgs`
// production keeps at least 0.9 of its rate alone.
// The closed-loop policies: `tgs` (from a small limit up) and `harvest` (the default: from no limit
// down). Both must hold production and let the opportunistic job into production's gaps.
class ClosedLoop : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(RateControl, ClosedLoop, ::testing::Values("tgs", "harvest"));

TEST_P(ClosedLoop, HoldsASaturatingProductionJobNearItsSoloRate) {
  TempDir dir;
  std::string device = dir / "device";
  Workload w{.kernel_us = 2000, .gap_us = 0, .settle_s = 2.5, .seconds = 3};
  Workload solo = w;
  solo.settle_s = 0.5;
  double production_alone = alone(dir, device, "prod-alone", solo);
  ASSERT_GT(production_alone, 100);

  Pair plain = together(dir, device, "", w, w);
  double plain_nt = plain.production / production_alone;

  Daemon daemon(dir, config_with_policy(GetParam()));
  ASSERT_TRUE(daemon.start()) << daemon.log();
  Pair tgs = together(dir, device, daemon.socket, w, w);
  double tgs_nt = tgs.production / production_alone;

  RecordProperty("production_alone_kernels_per_s", std::to_string(production_alone));
  std::printf("production alone %.0f/s; no daemon NT %.3f (opp %.0f/s); %s NT %.3f (opp %.0f/s)\n",
              production_alone, plain_nt, plain.opportunistic, GetParam().c_str(), tgs_nt,
              tgs.opportunistic);
  EXPECT_LE(plain_nt, 0.6);
  // Both laws settle near their 0.95 (harvest up to half a noise margin under it, by design,
  // docs/policies.md). The bound leaves room for the 2-core machine's scheduling noise: with
  // compilers running beside the test, tgs measured 0.885-0.890 and harvest 0.895, 0.92-0.95
  // otherwise; without a daemon production gets 0.49-0.51.
  EXPECT_GE(tgs_nt, 0.85);
}

// Production with idle gaps: the opportunistic job gets real work done in them.
TEST_P(ClosedLoop, OpportunisticJobUsesProductionsIdleGaps) {
  TempDir dir;
  std::string device = dir / "device";
  Workload production{.kernel_us = 2000, .gap_us = 6000, .settle_s = 2.5, .seconds = 3};
  Workload opportunistic{.kernel_us = 2000, .gap_us = 0, .settle_s = 2.5, .seconds = 3};
  Workload solo = opportunistic;
  solo.settle_s = 0.5;
  double opportunistic_alone = alone(dir, device, "opp-alone", solo);
  Workload production_solo = production;
  production_solo.settle_s = 0.5;
  double production_alone = alone(dir, device, "prod-alone", production_solo);

  Daemon daemon(dir, config_with_policy(GetParam()));
  ASSERT_TRUE(daemon.start()) << daemon.log();
  Pair tgs = together(dir, device, daemon.socket, production, opportunistic);
  double production_nt = tgs.production / production_alone;
  double opportunistic_nt = tgs.opportunistic / opportunistic_alone;
  std::printf("%s with gaps: production NT %.3f, opportunistic NT %.3f\n", GetParam().c_str(),
              production_nt, opportunistic_nt);
  // Production's completion marks must be fine enough for a job launching ~6 kernels a window:
  // with a fixed stride of 32 they came 0 or 32 per window, both laws read that noise as harm,
  // and the opportunistic job got 0.085 (harvest) and 0.086-0.3 (tgs) of its rate. With the
  // adaptive stride: tgs 0.44-0.75 and harvest 0.27-0.70 on an idle machine (2026-11-27), harvest
  // 0.18-0.38 earlier; it holds production nearer its target on this FIFO engine, where every
  // opportunistic kernel delays production's next one. One CI run (2026-11-27, a busy 2-core
  // machine) read tgs at 0.175 beside production 0.956: the bound is the same for both laws,
  // above the fixed stride's 0.085 and below what scheduling noise on the CI machine leaves.
  EXPECT_GT(opportunistic_nt, 0.12);
  // Production's gaps leave it room on this engine: without a daemon it keeps 0.97-0.98 on an
  // idle machine, as with either law. The bound says the law does not cost it more than the
  // 2-core machine's scheduling noise: harvest read 0.893 in one fresh-clone CI run (2026-11-26;
  // 0.975-0.98 on an idle machine), so it is the other test's 0.85.
  EXPECT_GE(production_nt, 0.85);
}

// The in-flight bound: `priority` gives an opportunistic job `in_flight` 4; its shim
// records an event every 2 launches and waits when 4 are unfinished. The fake driver's events
// complete 20 ms after they are recorded (a modelled queue), so the job can launch at most about
// 4 per 20 ms; a production job under the same daemon is never bounded.
TEST(RateControl, InFlightBoundHoldsAnOpportunisticQueueButNeverProduction) {
  TempDir dir;
  std::string device = dir / "device";
  constexpr unsigned kDelayUs = 20'000;
  constexpr double kBound = 4;
  const double most = kBound / (kDelayUs / 1e6);  // 200 launches/s
  Workload w{.kernel_us = 0, .gap_us = 0, .settle_s = 0.5, .seconds = 2, .event_delay_us = kDelayUs};
  const double unbounded = alone(dir, device, "opp-alone", w);

  nlohmann::json config = config_with_policy("priority");
  config["policy"]["parameters"] = {{"priority", {{"in_flight", kBound}}}};
  Daemon daemon(dir, config);
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ChildProcess o = start_workload(dir, device, daemon.socket, "opp", "opportunistic", w);
  // The ctl shows the bound in force and the count the shim publishes under it.
  nlohmann::json gate;
  EXPECT_TRUE(eventually(
      [&] {
        for (const nlohmann::json& job : list_jobs(daemon.socket))
          if (job.value("job", "") == "opp" && job.contains("gate")) gate = job["gate"];
        return gate.is_object() && gate.value("in_flight", nlohmann::json()).is_number();
      },
      10s))
      << gate.dump();
  EXPECT_EQ(gate.value("max_in_flight", nlohmann::json()), kBound) << gate.dump();
  EXPECT_LE(gate.value("in_flight", 0.0), kBound) << gate.dump();
  const double bounded = rate_of(o, dir, "opp");
  ChildProcess p = start_workload(dir, device, daemon.socket, "prod", "production", w);
  const double production = rate_of(p, dir, "prod");
  std::printf("unbounded %.0f/s, bounded %.0f/s (at most ~%.0f), production %.0f/s\n", unbounded,
              bounded, most, production);
  EXPECT_GT(unbounded, 10 * most);
  EXPECT_LE(bounded, 1.5 * most);
  EXPECT_GE(bounded, 0.1 * most);  // held, not stopped
  EXPECT_GT(production, 10 * most);
}

// The completion signal: a production job's shim records a mark every 32 launches and its poller
// publishes the latest one complete; the daemon shows it (`gpusharectl jobs -o json`,
// "completed_launches"). The fake driver's events complete 20 ms after they are recorded, so the
// count trails the launches but follows them. An opportunistic job records no marks.
TEST(RateControl, ProductionPublishesCompletionsAndOpportunisticJobsDoNot) {
  TempDir dir;
  std::string device = dir / "device";
  Workload w{.kernel_us = 200, .gap_us = 0, .settle_s = 0, .seconds = 3, .event_delay_us = 20'000};
  Daemon daemon(dir, config_with_policy("harvest"));
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ChildProcess p = start_workload(dir, device, daemon.socket, "prod", "production", w);
  ChildProcess o = start_workload(dir, device, daemon.socket, "opp", "opportunistic", w);
  uint64_t first = 0, last = 0, launches = 0;
  bool opportunistic_tracked = false;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(50ms);
    for (const nlohmann::json& job : list_jobs(daemon.socket)) {
      if (job.value("job", "") == "opp")
        opportunistic_tracked = opportunistic_tracked || job.contains("completed_launches");
      if (job.value("job", "") != "prod" || !job.contains("completed_launches")) continue;
      last = job["completed_launches"].get<uint64_t>();
      launches = job["launches"].get<uint64_t>();
      if (first == 0) first = last;
    }
  }
  rate_of(p, dir, "prod");
  rate_of(o, dir, "opp");
  std::printf("completed launches %llu -> %llu (launches %llu)\n",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
              static_cast<unsigned long long>(launches));
  EXPECT_GT(first, 0u);
  EXPECT_GT(last, first);  // it follows the job
  EXPECT_LE(last, launches);
  EXPECT_FALSE(opportunistic_tracked);
}

// Kernel-level idle gating: with `production_idle_only` the opportunistic job's launches wait
// while production has work on the engine (its completion marks, sampled by the daemon's idle
// relay every 250 µs) and run in its gaps, so production meets at most one short opportunistic
// kernel when it comes back. Production: 2 ms kernels with 6 ms gaps (0.75 of the time idle);
// opportunistic: back-to-back 200 µs kernels.
class KernelIdleGating : public ::testing::TestWithParam<std::pair<std::string, nlohmann::json>> {};
INSTANTIATE_TEST_SUITE_P(
    RateControl, KernelIdleGating,
    // harvest gates while production leaves gaps (here 0.25 busy) and runs no rate law then: with
    // the law on as well it sometimes throttled the opportunistic job to 0.28 on noise.
    ::testing::Values(std::pair<std::string, nlohmann::json>{"priority", {{"kernel_gating", 1}}},
                      std::pair<std::string, nlohmann::json>{
                          "harvest", {{"kernel_gating", 1}, {"in_flight", 2}}},
                      // The concurrency budget: beside periods cost production here (the FIFO
                      // engine queues the opportunistic backlog ahead of it), so it rations them
                      // and the gated periods give the opportunistic job the gaps.
                      std::pair<std::string, nlohmann::json>{
                          "harvest_concurrency", {{"concurrency", 1}, {"in_flight", 2}}}),
    [](const auto& info) { return info.param.first; });

TEST_P(KernelIdleGating, OpportunisticWorkFillsProductionsGapsAndOnlyThem) {
  const auto& [policy, parameters] = GetParam();
  TempDir dir;
  std::string device = dir / "device";
  Workload production{.kernel_us = 2000, .gap_us = 6000, .settle_s = 1.5, .seconds = 3};
  Workload opportunistic{.kernel_us = 200, .gap_us = 0, .settle_s = 1.5, .seconds = 3};
  Workload solo = opportunistic;
  solo.settle_s = 0.5;
  const double opportunistic_alone = alone(dir, device, "opp-alone", solo);
  Workload production_solo = production;
  production_solo.settle_s = 0.5;
  const double production_alone = alone(dir, device, "prod-alone", production_solo);

  // Without gating the opportunistic backlog on the FIFO engine costs production a whole
  // opportunistic kernel at every launch, and the opportunistic job takes the engine half the time.
  Pair plain = together(dir, device, "", production, opportunistic);

  const std::string name = policy.substr(0, policy.find('_'));
  nlohmann::json config = config_with_policy(name);
  config["policy"]["parameters"] = {{name, parameters}};
  Daemon daemon(dir, config);
  ASSERT_TRUE(daemon.start()) << daemon.log();
  opportunistic.report = dir / "opp-report.json";
  Pair gated = together(dir, device, daemon.socket, production, opportunistic);
  const nlohmann::json report =
      nlohmann::json::parse(read_file(opportunistic.report), nullptr, false);
  ASSERT_TRUE(report.is_object() && report.contains("daemon")) << read_file(dir / "opp.err");
  const double held = report["daemon"].value("gated_ns", 0.0) / 1e9 /
                      (opportunistic.settle_s + opportunistic.seconds);
  const double production_nt = gated.production / production_alone;
  const double opportunistic_nt = gated.opportunistic / opportunistic_alone;
  const double gaps = 6.0 / 8.0;  // production's idle share of the time
  std::printf("%s idle-gated: production NT %.3f, opportunistic NT %.3f (%.2f of the gaps), held "
              "%.2f of its run; no daemon: production NT %.3f, opportunistic NT %.3f\n",
              policy.c_str(), production_nt, opportunistic_nt, opportunistic_nt / gaps, held,
              plain.production / production_alone, plain.opportunistic / opportunistic_alone);
  // On this engine a 200 µs opportunistic kernel costs production little even ungated (0.97-1.02
  // measured); the bound leaves room for the 2-core machine's scheduling noise (0.93-1.01 seen
  // with three compilers running beside it).
  EXPECT_GE(production_nt, 0.9);
  // The budget learns from production's speed period by period: with two busy loops on the 2
  // cores it read costs from the scheduling noise and paused more (0.41-0.88 of the gaps in 8 runs,
  // 2026-11-27; the gating policies 0.96-1.18). Paused throughout, it would get almost nothing.
  EXPECT_GE(opportunistic_nt, (policy == "harvest_concurrency" ? 0.3 : 0.6) * gaps);
  // ... and only the gaps. Its throughput cannot show that here: ungated, the opportunistic job
  // gets only 0.73-0.89 of its solo rate on this engine, and gated it measured up to 0.90 on a
  // loaded machine, so an upper bound on throughput told nothing. What the shim measured does:
  // gated, its launches waited about while production had work on the engine (a quarter of the
  // time), and no longer. The budget (harvest_concurrency) also pauses it for whole periods and
  // runs it beside production in others, so its held share depends on the shares it chose.
  if (policy != "harvest_concurrency") {
    // How long it waited depends on where the scheduler finds it when production launches: at the
    // gate, or in its own synchronisation behind a kernel already queued. 0.13-0.16 of its run on
    // an idle machine; 0.01-0.16 with two busy loops on the 2 cores (2026-11-27, nice 0 or 15),
    // production at 0.97-0.99 throughout. So the lower bound is that it waited at all.
    EXPECT_GT(report["daemon"].value("gate_waits", 0), 0)
        << "the opportunistic job never waited for production";
    EXPECT_LE(held, 0.6) << "the opportunistic job waited beyond production's busy time";
  }
}
