// Clients that misbehave or die, and a daemon that dies: every byte from a client is untrusted,
// a bad client is dropped alone, and the shims survive the daemon.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "gpushare/protocol/framing.h"
#include "harness.h"

namespace gpushare::testing {
namespace {

using protocol::MessageType;

struct BadFrame {
  const char* name;
  std::function<bool(RawClient&)> send;
  const char* logged;  // what the drop line says
};

std::vector<BadFrame> bad_frames() {
  using protocol::FrameHeader;
  return {
      {"garbage", [](RawClient& c) { return c.send_bytes("hello daemon, how are you?", 26); },
       "bad magic"},
      {"short", [](RawClient& c) { return c.send_bytes("GPS", 3); },
       "frame shorter than its header"},
      {"truncated",
       [](RawClient& c) {
         // The header announces a whole registration; half of it arrives.
         std::vector<uint8_t> f(sizeof(FrameHeader) + sizeof(protocol::RegisterRequest) / 2);
         FrameHeader h = protocol::make_header(MessageType::register_request,
                                               sizeof(protocol::RegisterRequest));
         std::memcpy(f.data(), &h, sizeof h);
         return c.send_bytes(f.data(), f.size());
       },
       "truncated"},
      {"oversized length",
       [](RawClient& c) {
         FrameHeader h = protocol::make_header(MessageType::ctl_request, 0x7fffffff);
         return c.send_bytes(&h, sizeof h);
       },
       "payload length over the limit"},
      {"oversized datagram",
       [](RawClient& c) {
         int big = 1 << 20;
         setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
         std::vector<uint8_t> f(sizeof(FrameHeader) + protocol::kMaxPayload + 4096, 'x');
         FrameHeader h = protocol::make_header(MessageType::ctl_request,
                                               static_cast<uint32_t>(f.size() - sizeof h));
         std::memcpy(f.data(), &h, sizeof h);
         return c.send_bytes(f.data(), f.size());
       },
       "over the"},
      {"wrong size for type",
       [](RawClient& c) {
         char payload[5] = {};
         return c.send_frame(MessageType::mem_declare, payload, sizeof payload);
       },
       "wrong payload size"},
      {"unknown type",
       [](RawClient& c) { return c.send_frame(static_cast<MessageType>(77), nullptr, 0); },
       "unknown message type"},
      {"memory before registration",
       [](RawClient& c) {
         protocol::MemDeclare m{0x1000, 4096, 0, 0, 0, 0};
         return c.send_frame(MessageType::mem_declare, &m, sizeof m);
       },
       "declared memory before registering"},
      {"bad registration",
       [](RawClient& c) {
         protocol::RegisterRequest r{};
         r.requested_class = 7;
         protocol::copy_text(r.job_name, "x");
         return c.send_frame(MessageType::register_request, &r, sizeof r);
       },
       "requested class 7"},
      {"json that is not a request",
       [](RawClient& c) { return c.send_frame(MessageType::ctl_request, "[1,2", 4); },
       "not a JSON object"},
      {"passes a descriptor",
       [](RawClient& c) {
         return protocol::send_frame(c.fd, MessageType::ctl_request, "{}", 2, STDIN_FILENO) ==
                protocol::SendResult::sent;
       },
       "sent file descriptors"},
  };
}

TEST(Robustness, MalformedTruncatedAndOversizedFramesDropThatClientOnly) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess bystander = start_probe(dir, daemon.socket, probe_as("bystander"));
  ASSERT_TRUE(bystander.running());
  for (const BadFrame& bad : bad_frames()) {
    SCOPED_TRACE(bad.name);
    RawClient client;
    ASSERT_TRUE(client.connect(daemon.socket));
    ASSERT_TRUE(bad.send(client));
    EXPECT_TRUE(client.closed_by_daemon(5s));
    EXPECT_TRUE(daemon.wait_for_log("drop pid=" + std::to_string(getpid())));
    EXPECT_TRUE(daemon.wait_for_log(bad.logged)) << daemon.log();
  }
  // A frame of another protocol version is answered with an error naming ours, then dropped.
  RawClient future;
  ASSERT_TRUE(future.connect(daemon.socket));
  ASSERT_TRUE(future.send_frame(MessageType::ctl_request, "{}", 2, /*version=*/9));
  auto answer = future.receive(5s);
  ASSERT_TRUE(answer);
  protocol::FrameHeader h;
  std::memcpy(&h, answer->data(), sizeof h);
  EXPECT_EQ(h.type, static_cast<uint16_t>(MessageType::error));
  EXPECT_TRUE(future.closed_by_daemon(5s));

  // The daemon and the well-behaved client are untouched.
  auto job = job_with_pid(daemon.socket, bystander.pid());
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["job"], "bystander");
  EXPECT_EQ(bystander.ask("launch 10 0"), "ok");
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_GE(status.json["daemon"]["dropped_clients"].get<int>(),
            static_cast<int>(bad_frames().size()));
}

TEST(Robustness, AScribbledControlBlockCannotHurtTheDaemon) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient client;
  ASSERT_TRUE(client.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(client.register_job("scribbler", protocol::JobClass::opportunistic, 0, &memfd));
  ASSERT_GE(memfd, 0);
  // The block is sealed: shrinking it (which would fault the daemon's mapping) is refused.
  EXPECT_NE(ftruncate(memfd, 0), 0);
  void* page =
      mmap(nullptr, protocol::kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* block = static_cast<protocol::ControlBlock*>(page);
  // Counters that jump and go backwards, and garbage everywhere else.
  block->launches.store(~0ull);
  std::this_thread::sleep_for(200ms);
  std::memset(page, 0xa5, protocol::kControlBlockSize);
  std::this_thread::sleep_for(200ms);
  block->launches.store(5);
  std::this_thread::sleep_for(200ms);
  auto job = job_with_pid(daemon.socket, getpid());
  ASSERT_TRUE(job);
  EXPECT_GE((*job)["kernels_per_s"].get<double>(), 0.0);
  EXPECT_EQ(run_ctl(daemon.socket, {"status"}).exit_code, 0);
  munmap(page, protocol::kControlBlockSize);
  ::close(memfd);
}

TEST(Robustness, AKilledClientLeavesJobsWithinOneSecond) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess victim = start_probe(dir, daemon.socket, probe_as("victim"));
  ChildProcess survivor = start_probe(dir, daemon.socket, probe_as("survivor"));
  ASSERT_TRUE(victim.running() && survivor.running());
  ASSERT_TRUE(job_with_pid(daemon.socket, victim.pid()));
  pid_t pid = victim.pid();
  auto killed = std::chrono::steady_clock::now();
  victim.signal(SIGKILL);
  bool gone = eventually([&] { return !job_with_pid(daemon.socket, pid); }, 5s, 5ms);
  double seconds = seconds_since(killed);
  std::printf("[ measured ] killed client gone from `jobs` after %.3f s\n", seconds);
  ASSERT_TRUE(gone);
  EXPECT_LT(seconds,
            1.0);  // the bound; the removal itself is immediate (EOF on its socket)
  EXPECT_TRUE(job_with_pid(daemon.socket, survivor.pid()));
  EXPECT_TRUE(daemon.log_contains("unregister pid=" + std::to_string(pid)));
}

TEST(Robustness, ShimsOutliveAKilledDaemonAndReRegisterWithTheirAllocations) {
  TempDir dir;
  auto daemon = std::make_unique<Daemon>(dir);
  ASSERT_TRUE(daemon->start());
  ChildProcess probe = start_probe(dir, daemon->socket, probe_as("survivor"));
  ASSERT_TRUE(probe.running());
  ASSERT_EQ(probe.ask("alloc 1048576").rfind("ok ", 0), 0u);
  std::string second = probe.ask("alloc 2097152");
  ASSERT_EQ(second.rfind("ok ", 0), 0u);
  ASSERT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon->socket, probe.pid());
        return j && (*j)["memory_bytes"] == 3145728;
      },
      5s));

  daemon->kill(SIGKILL);
  ASSERT_NE(daemon->wait(), -1);
  // The program keeps running: launches and allocations pass through while no daemon is there.
  EXPECT_EQ(probe.ask("launch 50 0"), "ok");
  EXPECT_EQ(probe.ask("free " + second.substr(3)), "ok");
  EXPECT_EQ(probe.ask("alloc 4194304").rfind("ok ", 0), 0u);

  Daemon restarted(dir);
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(restarted.start()) << restarted.log();
  // The shim maps the new daemon's control block, and the new daemon knows what is allocated now.
  std::string block = probe.ask("wait-block 10000", 15s);
  EXPECT_EQ(block.rfind("block ", 0), 0u) << block;
  bool redeclared = eventually(
      [&] {
        auto j = job_with_pid(restarted.socket, probe.pid());
        return j && (*j)["memory_bytes"] == 1048576 + 4194304 && (*j)["job"] == "survivor";
      },
      10s, 20ms);
  std::printf("[ measured ] re-registered with live allocations %.3f s after the restart\n",
              seconds_since(started));
  EXPECT_TRUE(redeclared) << list_jobs(restarted.socket).dump();
  EXPECT_EQ(probe.ask("launch 10 0"), "ok");
  // One warning for the loss, none per retry.
  std::string warnings = read_file(dir / "probe.stderr");
  EXPECT_NE(warnings.find("lost gpushared"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("not reachable"), std::string::npos) << warnings;
}

// Daemonising code closes descriptors it does not own: the shim notices, never touches the number
// the program reuses, and registers again.
TEST(Robustness, AProgramClosingTheShimsSocketIsSurvived) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("closer"));
  ASSERT_TRUE(probe.running());
  ASSERT_EQ(probe.ask("alloc 1048576").rfind("ok ", 0), 0u);
  std::string closed = probe.ask("close-sockets");
  ASSERT_EQ(closed.rfind("ok ", 0), 0u) << closed;
  std::string reused_fd = closed.substr(3);
  EXPECT_EQ(probe.ask("wait-block 10000", 15s).rfind("block ", 0), 0u);
  EXPECT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon.socket, probe.pid());
        return j && (*j)["memory_bytes"] == 1048576;
      },
      5s));
  EXPECT_EQ(probe.ask("alloc 4096").rfind("ok ", 0), 0u);
  EXPECT_EQ(probe.ask("check-fd " + reused_fd), "ok");
}

TEST(Robustness, AFatalSignalLogsASymbolizedBacktraceAndKillsTheDaemon) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  daemon.kill(SIGSEGV);
  int status = daemon.wait();
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  std::string log = daemon.log();
  EXPECT_NE(log.find("fatal signal 11"), std::string::npos) << log;
  EXPECT_NE(log.find("gpushare::daemon::Server::run"), std::string::npos) << log;
  EXPECT_NE(log.find(" main+0x"), std::string::npos) << log;
}

}  // namespace
}  // namespace gpushare::testing
