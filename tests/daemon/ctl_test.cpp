// gpusharectl against a real daemon: authorisation, priority changes reaching the shim, reload,
// policies, exit codes.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;
constexpr uid_t kNobody = 65534;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

TEST(Ctl, APriorityChangeReachesTheShimsControlBlock) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("promoted"));
  ASSERT_TRUE(probe.running());
  ASSERT_NE(probe.ask("block").find("opportunistic"), std::string::npos);

  ASSERT_TRUE(probe.send_line("wait-class production 10000"));
  CtlResult r = run_ctl(daemon.socket, {"set-priority", std::to_string(probe.pid()), "production"});
  uint64_t replied = monotonic_ns();  // the daemon wrote the block before it replied
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("opportunistic -> production"), std::string::npos) << r.out;
  std::string seen = probe.read_line(15s).value_or("");
  ASSERT_EQ(seen.rfind("class production ", 0), 0u) << seen;
  uint64_t seen_ns = std::stoull(seen.substr(std::strlen("class production ")));
  double latency_ms = seen_ns > replied ? (seen_ns - replied) / 1e6 : 0.0;
  std::printf("[ measured ] shim saw the new class %.3f ms after gpusharectl returned\n",
              latency_ms);
  EXPECT_LT(latency_ms, 100.0);  // the bound; the store itself is immediate

  // By job name, back down; `jobs` agrees.
  ASSERT_TRUE(probe.send_line("wait-class opportunistic 10000"));
  EXPECT_EQ(
      run_ctl(daemon.socket, {"set-priority", "promoted", "opportunistic", "-o", "json"}).exit_code,
      0);
  EXPECT_EQ(probe.read_line(15s).value_or("").rfind("class opportunistic", 0), 0u);
  EXPECT_EQ((*job_with_pid(daemon.socket, probe.pid()))["class"], "opportunistic");
  EXPECT_TRUE(daemon.log_contains("priority pid=" + std::to_string(probe.pid())));
}

TEST(Ctl, AnUnauthorisedSetPriorityIsRefusedAndLogged) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"uid", 0}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("roots-job", "production"));
  ASSERT_TRUE(probe.running());
  ASSERT_EQ((*job_with_pid(daemon.socket, probe.pid()))["class"], "production");

  // nobody may not lower root's job, by pid or by name, nor change daemon-wide settings.
  CtlResult by_pid = run_ctl(
      daemon.socket, {"set-priority", std::to_string(probe.pid()), "opportunistic"}, kNobody);
  EXPECT_EQ(by_pid.exit_code, 1) << by_pid.out << by_pid.err;
  EXPECT_NE(by_pid.err.find("refused: uid 65534 may not change a job of uid 0"), std::string::npos)
      << by_pid.err;
  CtlResult by_name =
      run_ctl(daemon.socket, {"set-priority", "roots-job", "opportunistic", "-o", "json"}, kNobody);
  EXPECT_EQ(by_name.exit_code, 1);
  EXPECT_EQ(by_name.json["ok"], false);
  EXPECT_EQ(run_ctl(daemon.socket, {"policy", "0", "none"}, kNobody).exit_code, 1);
  EXPECT_EQ(run_ctl(daemon.socket, {"reload"}, kNobody).exit_code, 1);
  // Reading is open to everyone.
  EXPECT_EQ(run_ctl(daemon.socket, {"jobs"}, kNobody).exit_code, 0);

  EXPECT_TRUE(daemon.wait_for_log("refuse set-priority pid=" + std::to_string(probe.pid()) +
                                  " job=roots-job -> opportunistic by pid="));
  EXPECT_TRUE(daemon.log_contains("uid=65534"));
  EXPECT_TRUE(daemon.log_contains("refuse policy by pid="));
  EXPECT_EQ((*job_with_pid(daemon.socket, probe.pid()))["class"], "production");
  EXPECT_NE(probe.ask("block").find("production"), std::string::npos);
}

TEST(Ctl, UsersMayLowerTheirOwnJobsButNotRaiseThem) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"uid", kNobody}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess own = start_probe(dir, daemon.socket, probe_as("mine", "production", kNobody));
  ASSERT_TRUE(own.running()) << read_file(dir / "probe-65534.stderr");
  ASSERT_EQ((*job_with_pid(daemon.socket, own.pid()))["uid"], kNobody);
  ASSERT_EQ((*job_with_pid(daemon.socket, own.pid()))["class"], "production");

  std::string pid = std::to_string(own.pid());
  EXPECT_EQ(run_ctl(daemon.socket, {"set-priority", pid, "opportunistic"}, kNobody).exit_code, 0);
  EXPECT_EQ(own.ask("wait-class opportunistic 5000").rfind("class opportunistic", 0), 0u);
  CtlResult raise = run_ctl(daemon.socket, {"set-priority", pid, "production"}, kNobody);
  EXPECT_EQ(raise.exit_code, 1);
  EXPECT_NE(raise.err.find("only root or the admin group may raise"), std::string::npos)
      << raise.err;
  EXPECT_EQ((*job_with_pid(daemon.socket, own.pid()))["class"], "opportunistic");
}

TEST(Ctl, ReloadAppliesAGoodFileAndKeepsTheOldOneOnABadFile) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  daemon.write_config({{"production", {{{"uid", 0}, {"job", "late-*"}}}}});
  CtlResult good = run_ctl(daemon.socket, {"reload"});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  ChildProcess first = start_probe(dir, daemon.socket, probe_as("late-1", "production"));
  ASSERT_TRUE(first.running());
  EXPECT_EQ((*job_with_pid(daemon.socket, first.pid()))["class"], "production");

  daemon.write_config({{"production", json::array()}, {"tick_ms", "soon"}});
  CtlResult bad = run_ctl(daemon.socket, {"reload"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("tick_ms: expected an integer in [10, 1000], got \"soon\""),
            std::string::npos)
      << bad.err;
  daemon.kill(SIGHUP);
  EXPECT_TRUE(daemon.wait_for_log("failed, the previous configuration stays in force"));
  // The old rules still apply.
  ChildProcess second = start_probe(dir, daemon.socket, probe_as("late-2", "production"));
  ASSERT_TRUE(second.running());
  EXPECT_EQ((*job_with_pid(daemon.socket, second.pid()))["class"], "production");
}

TEST(Ctl, PolicyNamesAreValidatedAndShownInStatus) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  EXPECT_EQ(run_ctl(daemon.socket, {"policy", "1", "none"}).exit_code, 0);
  EXPECT_EQ(run_ctl(daemon.socket, {"policy", "1", "tgs", "target=0.9"}).exit_code, 0);
  CtlResult out_of_range = run_ctl(daemon.socket, {"policy", "1", "tgs", "target=7"});
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_NE(out_of_range.err.find("target"), std::string::npos) << out_of_range.err;
  CtlResult bad_pair = run_ctl(daemon.socket, {"policy", "1", "tgs", "target"});
  EXPECT_EQ(bad_pair.exit_code, 1);
  CtlResult unknown = run_ctl(daemon.socket, {"policy", "1", "fastest"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("expected one of: harvest, tgs, priority, fair, none"), std::string::npos);
  // Kernel-level idle gating is carried out by this daemon and shim (the idle relay).
  CtlResult gating = run_ctl(daemon.socket, {"policy", "1", "priority", "kernel_gating=1"});
  EXPECT_EQ(gating.exit_code, 0) << gating.err;
  EXPECT_EQ(run_ctl(daemon.socket, {"policy", "1", "tgs", "target=0.9"}).exit_code, 0);
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.exit_code, 0);
  ASSERT_EQ(status.json["devices"].size(), 1u) << status.out;
  EXPECT_EQ(status.json["devices"][0]["device"], 1);
  // The refused choices left the last accepted one in force.
  EXPECT_EQ(status.json["devices"][0]["policy"], "tgs");
}

// A job registered for "any device" (no CUDA_VISIBLE_DEVICES, no memory yet) is scheduled on
// device 0; status counts it there instead of on no device at all.
TEST(Ctl, StatusCountsAJobForAnyDeviceWhereItIsScheduled) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient client;
  ASSERT_TRUE(client.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(client.register_job("anywhere", protocol::JobClass::opportunistic, 0, &memfd));
  if (memfd >= 0) ::close(memfd);
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.exit_code, 0);
  ASSERT_EQ(status.json["devices"].size(), 1u) << status.out;
  EXPECT_EQ(status.json["devices"][0]["device"], 0);
  EXPECT_EQ(status.json["devices"][0]["jobs"], 1) << status.out;
}

// The concurrency budget's account of its state (each mode's cost, gain and share) is in
// `gpusharectl status`, text and JSON, once the policy has decided on the device.
TEST(Ctl, StatusShowsWhatThePolicyBelieves) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  CtlResult chosen = run_ctl(daemon.socket, {"policy", "0", "harvest", "concurrency=1"});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  RawClient client;
  ASSERT_TRUE(client.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(client.register_job("train", protocol::JobClass::opportunistic, 0, &memfd));
  if (memfd >= 0) ::close(memfd);
  nlohmann::json state;
  EXPECT_TRUE(eventually(
      [&] {
        CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
        if (status.json["devices"].empty()) return false;
        state = status.json["devices"][0].value("policy_state", nlohmann::json());
        return state.is_object();
      },
      10s))
      << state.dump();
  EXPECT_EQ(state.value("explanation", std::string()).rfind("budget gated=", 0), 0u)
      << state.dump();
  CtlResult text = run_ctl(daemon.socket, {"status"});
  EXPECT_NE(text.out.find("policy device 0: budget gated="), std::string::npos) << text.out;
}

TEST(Ctl, ExitCodesAndJsonOutput) {
  TempDir dir;
  EXPECT_EQ(run_ctl(dir / "absent.sock", {"status"}).exit_code, 3);
  CtlResult unreachable = run_ctl(dir / "absent.sock", {"jobs", "-o", "json"});
  EXPECT_EQ(unreachable.exit_code, 3);
  EXPECT_EQ(unreachable.json["ok"], false);
  EXPECT_EQ(run_ctl(dir / "absent.sock", {"set-priority", "1"}).exit_code, 2);
  EXPECT_EQ(run_ctl(dir / "absent.sock", {"frobnicate"}).exit_code, 2);
  CtlResult help = run_ctl(dir / "absent.sock", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("3  the daemon is unreachable"), std::string::npos) << help.out;

  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  for (std::vector<std::string> command :
       {std::vector<std::string>{"status"}, {"jobs"}, {"reload"}, {"policy", "0", "none"}}) {
    command.insert(command.end(), {"-o", "json"});
    CtlResult r = run_ctl(daemon.socket, command);
    EXPECT_EQ(r.exit_code, 0) << command[0] << r.err;
    EXPECT_EQ(r.json.value("ok", false), true) << command[0] << r.out;
  }
  CtlResult missing = run_ctl(daemon.socket, {"set-priority", "999999", "production"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no registered job with pid 999999"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::testing
