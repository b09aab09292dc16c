// The shim's side of the link: fail-open with one warning, fail-closed on request, late daemons,
// and a daemon that dies with the gate closed.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "gpushare/protocol/framing.h"
#include "harness.h"
#include "shared_control_block.h"
#include "shim_preload.h"
#include "socket_io.h"

namespace gpushare::testing {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ShimLink, WithoutADaemonTheShimWarnsOnceRunsAndRegistersWhenTheDaemonStarts) {
  TempDir dir;
  Daemon daemon(dir);  // configured, not started yet
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("early"));
  ASSERT_TRUE(probe.running());
  EXPECT_EQ(probe.ask("alloc 1048576").rfind("ok ", 0), 0u);
  EXPECT_EQ(probe.ask("launch 20 0"), "ok");
  std::this_thread::sleep_for(2500ms);  // two or three retries
  std::string stderr_text = read_file(dir / "probe.stderr");
  EXPECT_EQ(count(stderr_text, "warning"), 1u) << stderr_text;
  EXPECT_NE(stderr_text.find("gpushared is not reachable at " + daemon.socket), std::string::npos);

  ASSERT_TRUE(daemon.start());
  EXPECT_EQ(probe.ask("wait-block 10000", 15s).rfind("block ", 0), 0u);
  EXPECT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon.socket, probe.pid());
        return j && (*j)["memory_bytes"] == 1048576;
      },
      5s));
}

TEST(ShimLink, RequireDaemonMakesCuInitFailWithoutOne) {
  TempDir dir;
  ChildProcess probe = ChildProcess::start({Artefacts::probe()},
                                           {{"PATH", "/usr/bin:/bin"},
                                            {"LD_PRELOAD", shim_preload(Artefacts::shim())},
                                            {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
                                            {"GPUSHARE_SOCKET", dir / "absent.sock"},
                                            {"GPUSHARE_REQUIRE_DAEMON", "1"},
                                            {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"}},
                                           dir / "probe.stderr");
  ASSERT_EQ(probe.read_line(20s).value_or("").rfind("ready", 0), 0u);
  EXPECT_EQ(probe.ask("init"), "error cuInit");
  EXPECT_NE(read_file(dir / "probe.stderr").find("GPUSHARE_REQUIRE_DAEMON=1"), std::string::npos);

  // The same program succeeds on a later cuInit once the daemon is there.
  Daemon daemon(dir);
  daemon.socket = dir / "absent.sock";
  daemon.write_config({});
  ASSERT_TRUE(daemon.start());
  EXPECT_EQ(probe.ask("init"), "ok");
  EXPECT_TRUE(job_with_pid(daemon.socket, probe.pid()));
}

// The test plays a daemon that closes the gate, then dies: the shim must let the program go on.
TEST(ShimLink, ADeadDaemonNeverLeavesTheShimPaused) {
  TempDir dir;
  std::string socket = dir / "fake-daemon.sock";
  std::string error;
  int listener = daemon::listen_unix(socket, 0666, std::nullopt, &error);
  ASSERT_GE(listener, 0) << error;
  ChildProcess probe = ChildProcess::start({Artefacts::probe()},
                                           {{"PATH", "/usr/bin:/bin"},
                                            {"LD_PRELOAD", shim_preload(Artefacts::shim())},
                                            {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
                                            {"GPUSHARE_SOCKET", socket},
                                            {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"}},
                                           dir / "probe.stderr");
  ASSERT_EQ(probe.read_line(20s).value_or("").rfind("ready", 0), 0u);
  ASSERT_TRUE(probe.send_line("init"));

  // The shim first asks about MPS on a connection of its own (docs/mps.md): closing it unanswered
  // means "no MPS". Its registration comes on the next connection.
  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 20000), 1);
  int query = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(query, 0);
  ::close(query);
  ASSERT_EQ(poll(&p, 1, 20000), 1);
  int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(client, 0);
  uint8_t frame[sizeof(protocol::FrameHeader) + sizeof(protocol::RegisterRequest)];
  ASSERT_EQ(recv(client, frame, sizeof frame, 0), static_cast<ssize_t>(sizeof frame));
  daemon::SharedControlBlock block =
      daemon::SharedControlBlock::create(7, protocol::JobClass::opportunistic, &error);
  ASSERT_TRUE(block.valid()) << error;
  block.set_gate(protocol::kUnlimited, /*paused=*/true);
  protocol::RegisterReply reply{};
  reply.job_id = 7;
  reply.granted_class = static_cast<uint32_t>(protocol::JobClass::opportunistic);
  ASSERT_EQ(protocol::send_frame(client, protocol::MessageType::register_reply, &reply,
                                 sizeof reply, block.memfd()),
            protocol::SendResult::sent);
  ASSERT_EQ(probe.read_line(20s).value_or(""), "ok");

  // Paused: the launch waits at the gate.
  ASSERT_TRUE(probe.send_line("launch 1 0"));
  EXPECT_FALSE(probe.read_line(500ms)) << "a paused launch went through";
  // The daemon dies.
  auto died = std::chrono::steady_clock::now();
  ::close(client);
  ::close(listener);
  EXPECT_EQ(probe.read_line(10s).value_or(""), "ok");
  std::printf("[ measured ] paused launch released %.3f s after the daemon's connection closed\n",
              seconds_since(died));
  EXPECT_NE(read_file(dir / "probe.stderr").find("lost gpushared"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::testing
