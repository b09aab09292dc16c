// The units an operator installs pass `systemd-analyze verify`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "harness.h"

namespace gpushare::testing {
namespace {

TEST(SystemdUnits, ServiceAndSocketUnitsVerify) {
  if (access("/usr/bin/systemd-analyze", X_OK) != 0 && access("/bin/systemd-analyze", X_OK) != 0)
    GTEST_SKIP() << "systemd-analyze is not installed";
  TempDir dir;
  // The units name /usr/sbin/gpushared; verify them against the built binary at that name's place.
  for (const char* unit : {"gpushared.service", "gpushared.socket"}) {
    std::string text = read_file(std::string(Artefacts::deploy_dir()) + "/" + unit);
    ASSERT_FALSE(text.empty()) << unit;
    text = std::regex_replace(text, std::regex("/usr/sbin/gpushared"), Artefacts::daemon());
    text = std::regex_replace(text, std::regex("/usr/bin/gpusharectl"), Artefacts::ctl());
    std::ofstream(dir / unit) << text;
  }
  std::string command = "cd " + dir.path +
                        " && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "
                        "gpushared.service gpushared.socket > verify.log 2>&1";
  int status = std::system(command.c_str());
  std::string output = read_file(dir / "verify.log");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_EQ(output, "") << "systemd-analyze had remarks";
}

}  // namespace
}  // namespace gpushare::testing

namespace gpushare::testing {
namespace {

// gpushared.socket's way of starting the daemon: systemd listens, passes the socket on the first
// connection (sd_listen_fds), and the daemon serves it instead of binding its own.
TEST(SystemdUnits, SocketActivationServesThePassedSocket) {
  if (access("/usr/bin/systemd-socket-activate", X_OK) != 0)
    GTEST_SKIP() << "systemd-socket-activate is not installed";
  TempDir dir;
  Daemon configured(dir);  // writes the config; its socket.path must be ignored
  std::string socket = dir / "activated.sock";
  ChildProcess activator =
      ChildProcess::start({"/usr/bin/systemd-socket-activate", "--seqpacket", "-l", socket,
                           Artefacts::daemon(), "--config", configured.config_path},
                          {{"PATH", "/usr/bin:/bin"}}, dir / "activated.log");
  ASSERT_TRUE(eventually([&] { return access(socket.c_str(), F_OK) == 0; }, 10s));
  CtlResult status;
  ASSERT_TRUE(eventually(
      [&] {
        return (status = run_ctl(socket, {"status", "-o", "json"})).exit_code == 0;
      },
      10s, 50ms))
      << read_file(dir / "activated.log");
  EXPECT_EQ(status.json["daemon"]["socket_activated"], true);
  ChildProcess probe = start_probe(dir, socket, probe_as("activated"));
  ASSERT_TRUE(probe.running());
  EXPECT_TRUE(job_with_pid(socket, probe.pid()));
  EXPECT_EQ(access(configured.socket.c_str(), F_OK), -1);  // never bound
  activator.signal(SIGTERM);
  EXPECT_NE(activator.wait(), -1);
}

}  // namespace
}  // namespace gpushare::testing
