// The rough edges a new user found in gpusharectl and gpushared (docs/daemon.md): --version,
// unknown commands, device and size validation, what `set-limit none` does, what `status` and
// `policy` show, and `--check-config`'s output. Also `gpusharectl record` end to end.
#include <gtest/gtest.h>

#include <fstream>

#include "harness.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(CtlUsability, VersionUnknownCommandsAndNegativeDevices) {
  TempDir dir;
  CtlResult version = run_ctl(dir / "absent.sock", {"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("gpusharectl 0.", 0), 0u) << version.out;

  CtlResult unknown = run_ctl(dir / "absent.sock", {"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown command 'frobnicate'"), std::string::npos) << unknown.err;
  EXPECT_LE(count_lines(unknown.err), 1) << unknown.err;

  CtlResult negative = run_ctl(dir / "absent.sock", {"policy", "-1", "tgs"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("device must be 0..1023, got -1"), std::string::npos) << negative.err;
  EXPECT_LE(count_lines(negative.err), 1) << negative.err;
}

TEST(CtlUsability, PolicyOnADeviceThatDoesNotExistIsRefusedAndParametersAreEchoed) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("on-device-0"));
  ASSERT_TRUE(probe.running());
  ASSERT_EQ(probe.ask("alloc 1048576").rfind("ok", 0), 0u);  // memory on device 0
  CtlResult absent = run_ctl(daemon.socket, {"policy", "5", "tgs"});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("device 5 does not exist (devices: 0)"), std::string::npos)
      << absent.err;

  CtlResult set = run_ctl(daemon.socket, {"policy", "0", "tgs", "target=0.8"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("device 0: none -> tgs "), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("target=0.8"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("control_period_ms=200"), std::string::npos) << set.out;  // a default
  EXPECT_TRUE(daemon.wait_for_log("\"target\":0.8")) << daemon.log();
}

TEST(CtlUsability, StatusShowsCapacityOversubscriptionAndParameters) {
  TempDir dir;
  Daemon daemon(dir,
                {{"memory", {{"capacity", "2G"}, {"oversubscribe", true}}},
                 {"policy", {{"default", "tgs"}, {"parameters", {{"tgs", {{"target", 0.9}}}}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("shown"));
  ASSERT_TRUE(probe.running());
  CtlResult status = run_ctl(daemon.socket, {"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("oversubscription on"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("CAPACITY"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("2.0 GiB"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("target=0.9"), std::string::npos) << status.out;
}

TEST(CtlUsability, SetLimitValidatesSizesAndNoneReturnsToTheConfiguredRule) {
  TempDir dir;
  Daemon daemon(dir, {{"memory", {{"limits", {{"lim-*", "1G"}}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("lim-a"));
  ASSERT_TRUE(probe.running());
  CtlResult bad = run_ctl(daemon.socket, {"set-limit", "lim-a", "12X"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'12X' is not a size"), std::string::npos) << bad.err;
  CtlResult zero = run_ctl(daemon.socket, {"set-limit", "lim-a", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("'0' would refuse every allocation"), std::string::npos) << zero.err;

  auto limit = [&] {
    return (*job_with_pid(daemon.socket, probe.pid()))["memory_state"]["limit_bytes"];
  };
  EXPECT_EQ(limit(), uint64_t{1} << 30);
  ASSERT_EQ(run_ctl(daemon.socket, {"set-limit", "lim-a", "512M"}).exit_code, 0);
  EXPECT_EQ(limit(), uint64_t{512} << 20);
  CtlResult none = run_ctl(daemon.socket, {"set-limit", "lim-a", "none"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.out.find("512.0 MiB -> 1.0 GiB"), std::string::npos) << none.out;
  EXPECT_EQ(limit(), uint64_t{1} << 30);  // the rule again, not "no limit"
  ASSERT_EQ(run_ctl(daemon.socket, {"set-limit", "lim-a", "unlimited"}).exit_code, 0);
  EXPECT_TRUE(limit().is_null());  // and no limit at all, the rule's lifted too
}

TEST(CtlUsability, CheckConfigPrintsPlainErrorsWithTheReason) {
  TempDir dir;
  std::ofstream(dir / "bad.json") << R"({"tick_ms": 5})";
  for (auto [file, expected] : {std::pair<std::string, std::string>{dir / "bad.json", "tick_ms"},
                                {dir / "absent.json", "No such file or directory"}}) {
    const std::string err_path = file + ".err";
    ChildProcess check =
        ChildProcess::start({Artefacts::daemon(), "--check-config", "--config", file},
                            {{"PATH", "/usr/bin:/bin"}}, err_path);
    int status = check.wait(10s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    std::string err = read_file(err_path);
    EXPECT_EQ(err.rfind(file + ": ", 0), 0u) << err;  // no timestamp, no log level
    EXPECT_NE(err.find(expected), std::string::npos) << err;
  }
}

TEST(CtlRecord, WritesATraceWithATrackPerJob) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("recorded"));
  ASSERT_TRUE(probe.running());
  CtlResult r = run_ctl(daemon.socket, {"record", "--seconds", "0.5", "-o", dir / "trace.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json trace = json::parse(read_file(dir / "trace.json"), nullptr, false);
  ASSERT_TRUE(trace.is_object() && trace["traceEvents"].is_array());
  bool track = false, gate = false;
  for (const json& e : trace["traceEvents"]) {
    track = track || (e["ph"] == "M" && e["pid"] == probe.pid() &&
                      e["args"]["name"] == "recorded (pid " + std::to_string(probe.pid()) + ")");
    gate = gate ||
           (e["ph"] == "X" && e["pid"] == probe.pid() && e["name"] == "running (opportunistic)");
  }
  EXPECT_TRUE(track && gate) << trace.dump().substr(0, 2000);
  EXPECT_GE(trace["otherData"]["samples"].get<int>(), 5);  // one a tick (50 ms) for 0.5 s
}

}  // namespace
}  // namespace gpushare::testing
