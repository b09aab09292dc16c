// The daemon's MPS decisions without processes: the config keys, who may be a client, the client
// settings of each class, and what the MPS programs print.
#include <gtest/gtest.h>

#include <regex>

#include "config.h"
#include "mps_access.h"
#include "mps_control.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;

ConfigResult parse(const std::string& text) {
  return parse_config(text);
}

TEST(MpsConfig, OffByDefault) {
  ConfigResult r = parse("{}");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->mps.mode, MpsMode::off);
  EXPECT_FALSE(r.config->mps.thread_percentage);
  EXPECT_FALSE(r.config->mps.pipe_directory);
}

TEST(MpsConfig, EachModeAndTheOptionalKeys) {
  ConfigResult r = parse(R"({"mps": "auto", "mps_thread_percentage": 30})");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->mps.mode, MpsMode::automatic);
  EXPECT_EQ(r.config->mps.thread_percentage, 30);
  r = parse(R"({"mps": "external", "mps_pipe_directory": "/var/run/mps"})");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->mps.mode, MpsMode::external);
  EXPECT_EQ(r.config->mps.pipe_directory, "/var/run/mps");
  r = parse(R"({"mps": "off", "mps_thread_percentage": 100})");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->mps.mode, MpsMode::off);
}

TEST(MpsConfig, BadValuesNameTheKey) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {R"({"mps": "on"})", "mps: expected one of \"auto\", \"off\", \"external\", got \"on\""},
      {R"({"mps": true})", "mps: expected one of"},
      {R"({"mps_thread_percentage": 0})", "mps_thread_percentage: expected an integer in [1, 100]"},
      {R"({"mps_thread_percentage": 101})",
       "mps_thread_percentage: expected an integer in [1, 100]"},
      {R"({"mps_thread_percentage": 50.5})", "mps_thread_percentage: expected an integer"},
      {R"({"mps_pipe_directory": "relative/dir"})",
       "mps_pipe_directory: expected an absolute path"},
      {R"({"mps_pipe_directory": ""})", "mps_pipe_directory: expected an absolute path"},
      {R"({"mps": "auto", "mps_pipe_directory": "/tmp/x"})",
       "mps_pipe_directory: only for \"mps\": \"external\""},
      {R"({"mps_pipe": "/tmp/x"})", "mps_pipe: unknown field"},
  };
  for (const Case& c : cases) {
    ConfigResult r = parse(c.text);
    EXPECT_FALSE(r.config) << c.text;
    EXPECT_NE(r.error_text().find(c.error), std::string::npos)
        << c.text << " -> " << r.error_text();
  }
  std::string long_path = "/" + std::string(kMpsPipeDirectoryMax, 'a');
  EXPECT_FALSE(parse(R"({"mps_pipe_directory": ")" + long_path + "\"}").config);
}

TEST(MpsConfig, TheDeployedExampleShowsTheKeyOff) {
  std::string example = read_text_file(std::string(DEPLOY_DIR) + "/gpushared.json");
  EXPECT_NE(example.find("\"mps\": \"off\""), std::string::npos);
  // Its admin group may not exist on the test machine.
  example = std::regex_replace(example, std::regex("\"gpushare\""), "\"root\"");
  ConfigResult r = parse(example);
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->mps.mode, MpsMode::off);
}

MpsService running(uid_t owner) {
  return {true, "/run/gpushare/mps/pipe", owner, ""};
}

TEST(MpsAccess, UnavailableServiceSaysWhy) {
  MpsService down{false, "/p", 0, "gpushared's MPS control daemon is restarting"};
  MpsAccess a = decide_mps_access(down, 1000, std::nullopt);
  EXPECT_FALSE(a.granted);
  EXPECT_EQ(a.why, "gpushared's MPS control daemon is restarting");
  EXPECT_FALSE(a.other_user);
}

TEST(MpsAccess, AnUnprivilegedControlDaemonServesOnlyItsUser) {
  EXPECT_TRUE(decide_mps_access(running(1000), 1000, std::nullopt).granted);
  MpsAccess other = decide_mps_access(running(1000), 1001, std::nullopt);
  EXPECT_FALSE(other.granted);
  EXPECT_TRUE(other.other_user);
  EXPECT_NE(other.why.find("runs as uid 1000 and serves only that user"), std::string::npos);
}

TEST(MpsAccess, RootsControlDaemonServesOneUserAtATime) {
  EXPECT_TRUE(decide_mps_access(running(0), 1001, std::nullopt).granted);  // free: anyone
  EXPECT_TRUE(decide_mps_access(running(0), 1001, 1001).granted);          // same user
  MpsAccess other = decide_mps_access(running(0), 1002, 1001);
  EXPECT_FALSE(other.granted);
  EXPECT_TRUE(other.other_user);
  EXPECT_NE(other.why.find("serves uid 1001"), std::string::npos);
}

TEST(MpsAccess, ClientSettingsFollowTheGrantedClass) {
  MpsClientSettings p = mps_client_settings(JobClass::production, 30);
  EXPECT_EQ(p.priority, 0u);
  EXPECT_EQ(p.thread_percentage, 0u);  // the limit is for opportunistic jobs only
  MpsClientSettings o = mps_client_settings(JobClass::opportunistic, 30);
  EXPECT_EQ(o.priority, 1u);
  EXPECT_EQ(o.thread_percentage, 30u);
  EXPECT_EQ(mps_client_settings(JobClass::opportunistic, std::nullopt).thread_percentage, 0u);
}

TEST(MpsAccess, ServingUserIsThatOfTheClientsStillRunning) {
  MpsClients clients;
  std::set<pid_t> alive = {10, 11};
  auto is_alive = [&](pid_t pid) { return alive.count(pid) > 0; };
  EXPECT_FALSE(clients.serving_uid(is_alive));
  clients.add(10, 1001);
  clients.add(11, 1001);
  EXPECT_EQ(clients.serving_uid(is_alive), 1001u);
  alive.erase(10);
  EXPECT_EQ(clients.serving_uid(is_alive), 1001u);
  alive.erase(11);
  EXPECT_FALSE(clients.serving_uid(is_alive));  // all gone: the next user may have the server
  EXPECT_EQ(clients.size(), 0u);
}

TEST(MpsControl, RecognisesTheControlDaemonOfAPipeDirectory) {
  using namespace std::string_literals;
  std::string cmd = "/usr/bin/nvidia-cuda-mps-control\0-d\0"s;
  std::string env = "PATH=/bin\0CUDA_MPS_PIPE_DIRECTORY=/run/gpushare/mps/pipe\0"s;
  EXPECT_TRUE(is_control_daemon(cmd, env, "/run/gpushare/mps/pipe"));
  EXPECT_FALSE(is_control_daemon(cmd, env, "/tmp/nvidia-mps"));
  EXPECT_TRUE(is_control_daemon(cmd, "PATH=/bin\0"s, "/tmp/nvidia-mps"));  // MPS's default
  EXPECT_TRUE(is_control_daemon(cmd, "CUDA_MPS_PIPE_DIRECTORY=/run/x/\0"s, "/run/x"));
  EXPECT_FALSE(is_control_daemon("nvidia-cuda-mps-server\0"s, env, "/run/gpushare/mps/pipe"));
  EXPECT_FALSE(
      is_control_daemon("sleep\0"s
                        "3600\0"s,
                        env, "/run/gpushare/mps/pipe"));
}

TEST(MpsControl, LastLineOfAProgramsOutput) {
  EXPECT_EQ(last_line("first\nAn instance of this daemon is already running\n\n"),
            "An instance of this daemon is already running");
  EXPECT_EQ(last_line("only"), "only");
  EXPECT_EQ(last_line("\n  \n"), "");
  EXPECT_EQ(last_line(std::string(500, 'x')).size(), 200u);
}

TEST(MpsControl, ComputeModesOfNvidiaSmi) {
  ComputeModes m = parse_compute_modes("Default\nExclusive_Process\nProhibited\n");
  EXPECT_EQ(m.gpus, 3);
  EXPECT_EQ(m.exclusive_process, std::vector<int>{1});
  EXPECT_EQ(m.prohibited, std::vector<int>{2});
  EXPECT_EQ(parse_compute_modes("").gpus, 0);
  EXPECT_TRUE(parse_compute_modes("Default\r\n").prohibited.empty());
}

TEST(MpsControl, RuntimeDirectoryAndPath) {
  EXPECT_EQ(mps_runtime_directory("/run/gpushare/gpushared.sock", nullptr), "/run/gpushare");
  EXPECT_EQ(mps_runtime_directory("/run/gpushare/gpushared.sock", "/run/gs:/run/other"), "/run/gs");
  EXPECT_EQ(find_on_path("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_FALSE(find_on_path("no-such-program-here", "/bin:/usr/bin"));
  EXPECT_FALSE(find_on_path("sh", nullptr));
}

}  // namespace
}  // namespace gpushare::daemon
