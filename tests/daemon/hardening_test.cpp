// Hardening: what an ordinary user (or a careless one) could do to deny service to everyone else,
// and what holds now. Each test drives the real daemon; counts are asserted with margins, never
// absolute times, so they hold on a busy machine.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <new>
#include <thread>

#include "gpushare/protocol/framing.h"
#include "gpushare/protocol/control_block.h"
#include "harness.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;
using protocol::MessageType;

constexpr uid_t kAttacker = 65534;  // nobody
constexpr uid_t kBystander = 65533;

// Runs `body` in a child process as `uid` (gid = uid, no supplementary groups); returns its pid.
pid_t run_as(uid_t uid, const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    gid_t gid = static_cast<gid_t>(uid);
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0)
      _exit(126);
    _exit(body());
  }
  return pid;
}

// The child's exit status, or -1 when it did not exit within `timeout`.
int exit_status(pid_t pid, Millis timeout = 30s) {
  int status = -1;
  bool done = eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout, 10ms);
  if (!done) {
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A ctl request over a raw connection; true when a ctl reply came back.
bool ask_status(RawClient& c, Millis timeout = 10s) {
  if (!c.send_frame(MessageType::ctl_request, R"({"command":"status"})", 20)) return false;
  auto answer = c.receive(timeout);
  if (!answer || answer->size() < sizeof(protocol::FrameHeader)) return false;
  protocol::FrameHeader h;
  std::memcpy(&h, answer->data(), sizeof h);
  return h.type == static_cast<uint16_t>(MessageType::ctl_reply);
}

// --- 1. connection exhaustion ------------------------------------------------------------------

// max_clients 64: 4 slots kept for root/admin, at most 15 connections per uid, 4 of them not yet
// registered (docs/daemon.md, "Connections").
TEST(Hardening, OneUserCannotFillTheConnectionTable) {
  TempDir dir;
  Daemon daemon(dir, {{"max_clients", 64}});
  ASSERT_TRUE(daemon.start());
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  // The attacker registers as many jobs as it can, then holds them.
  pid_t attacker = run_as(kAttacker, [&] {
    std::vector<std::unique_ptr<RawClient>> held;
    int registered = 0;
    for (int i = 0; i < 64; ++i) {
      auto c = std::make_unique<RawClient>();
      int memfd = -1;
      if (!c->connect(daemon.socket)) continue;
      if (c->register_job("hog", protocol::JobClass::opportunistic, 0, &memfd)) ++registered;
      if (memfd >= 0) ::close(memfd);
      held.push_back(std::move(c));
    }
    char n = static_cast<char>(registered);
    if (write(report[1], &n, 1) != 1) return 1;
    pause();
    return 0;
  });
  ::close(report[1]);
  char registered = 0;
  ASSERT_EQ(read(report[0], &registered, 1), 1);
  ::close(report[0]);
  std::printf("[ measured ] one uid registered %d of 64 connections\n", registered);
  EXPECT_GE(registered, 1);
  EXPECT_LE(registered, 15);

  // Root's ctl and another user's jobs still get through.
  EXPECT_EQ(run_ctl(daemon.socket, {"status"}).exit_code, 0);
  ChildProcess other =
      start_probe(dir, daemon.socket, probe_as("other", "opportunistic", kBystander));
  ASSERT_TRUE(other.running());
  EXPECT_TRUE(eventually([&] { return job_with_pid(daemon.socket, other.pid()).has_value(); }, 5s));
  EXPECT_TRUE(daemon.log_contains("connections (the most one uid may)")) << daemon.log();
  ::kill(attacker, SIGKILL);
  exit_status(attacker);
}

TEST(Hardening, TheLastSlotsAreKeptForRoot) {
  TempDir dir;
  Daemon daemon(dir, {{"max_clients", 16}});  // 1 slot kept, 3 per uid: five users fill the rest
  ASSERT_TRUE(daemon.start());
  std::vector<pid_t> users;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  int held = 0;
  // One user after the other, so no registration meets another user's handshake in flight.
  for (uid_t uid = 60000; uid < 60006; ++uid) {
    users.push_back(run_as(uid, [&] {
      std::vector<std::unique_ptr<RawClient>> held;
      for (int i = 0; i < 4; ++i) {
        auto c = std::make_unique<RawClient>();
        int memfd = -1;
        if (c->connect(daemon.socket) &&
            c->register_job("hog", protocol::JobClass::opportunistic, 0, &memfd))
          held.push_back(std::move(c));
        if (memfd >= 0) ::close(memfd);
      }
      char n = static_cast<char>(held.size());
      if (write(ready[1], &n, 1) != 1) return 1;
      pause();
      return 0;
    }));
    char n = 0;
    ASSERT_EQ(read(ready[0], &n, 1), 1);
    held += n;
  }
  ::close(ready[1]);
  ::close(ready[0]);
  std::printf("[ measured ] six users hold %d of 16 connections\n", held);
  EXPECT_EQ(held, 15);  // five users of three, the sixth finds only root's slot
  // An ordinary user finds the table full; root still gets an answer.
  CtlResult refused = run_ctl(daemon.socket, {"status"}, kBystander);
  CtlResult root = run_ctl(daemon.socket, {"status"});
  EXPECT_EQ(root.exit_code, 0) << root.err;
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_TRUE(daemon.log_contains("kept for root and the admin group")) << daemon.log();
  for (pid_t pid : users) {
    ::kill(pid, SIGKILL);
    exit_status(pid);
  }
}

TEST(Hardening, ConnectionsThatNeverRegisterAreClosed) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient idle, job;
  ASSERT_TRUE(idle.connect(daemon.socket));
  ASSERT_TRUE(job.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(job.register_job("patient", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  EXPECT_TRUE(idle.closed_by_daemon(30s));
  EXPECT_TRUE(daemon.log_contains("neither registered nor sent a request within 5 s"))
      << daemon.log();
  // A registered job may stay silent as long as it likes.
  EXPECT_FALSE(job.closed_by_daemon(100ms));
  EXPECT_TRUE(job_with_pid(daemon.socket, getpid()).has_value());
}

// A burst of connect-and-close fills the listen backlog while the daemon is busy (here: stopped):
// the EOFs are seen before a live client behind them is refused.
TEST(Hardening, ABurstOfClosedConnectionsDoesNotCrowdOutALiveClient) {
  TempDir dir;
  Daemon daemon(dir, {{"max_clients", 32}});
  ASSERT_TRUE(daemon.start());
  daemon.kill(SIGSTOP);
  pid_t burst = run_as(kAttacker, [&] {
    for (int i = 0; i < 300; ++i) {
      RawClient c;
      if (!c.connect(daemon.socket)) return 1;
    }
    return 0;
  });
  EXPECT_EQ(exit_status(burst), 0);
  // Behind them, an ordinary user's request.
  int connected[2];
  ASSERT_EQ(pipe(connected), 0);
  pid_t live = run_as(kBystander, [&] {
    RawClient c;
    if (!c.connect(daemon.socket)) return 2;
    char byte = 1;
    if (write(connected[1], &byte, 1) != 1) return 3;
    return ask_status(c, 20s) ? 0 : 1;
  });
  ::close(connected[1]);
  char byte = 0;
  EXPECT_EQ(read(connected[0], &byte, 1), 1);
  ::close(connected[0]);
  daemon.kill(SIGCONT);
  EXPECT_EQ(exit_status(live), 0) << daemon.log();
  EXPECT_LE(count_of(daemon.log(), "refusing pid="), 5u) << daemon.log();
}

// --- 2. unbounded logs -------------------------------------------------------------------------

TEST(Hardening, ManyBadClientsWriteAFewLinesAndASummary) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  constexpr int kBad = 60;
  for (int i = 0; i < kBad; ++i) {
    RawClient c;
    ASSERT_TRUE(c.connect(daemon.socket));
    ASSERT_TRUE(c.send_bytes("hello daemon, how are you?", 26));
    EXPECT_TRUE(c.closed_by_daemon(5s));
  }
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  EXPECT_GE(status.json["daemon"]["dropped_clients"].get<int>(), kBad);
  std::string log = daemon.log();
  EXPECT_GE(count_of(log, "drop pid="), 1u);
  EXPECT_LE(count_of(log, "drop pid="), 5u) << log;
  // The rest are counted, and said once the window (10 s) is over.
  EXPECT_TRUE(daemon.wait_for_log("suppressed", 30s)) << daemon.log();
  EXPECT_TRUE(daemon.log_contains("drop: bad frame: bad magic")) << daemon.log();
}

TEST(Hardening, AJobThatKeepsBeingRefusedMemoryIsDroppedAndLogsLittle) {
  TempDir dir;
  Daemon daemon(dir, {{"memory", {{"limits", {{"*", "1M"}}}}}});
  ASSERT_TRUE(daemon.start());
  RawClient c;
  ASSERT_TRUE(c.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(c.register_job("greedy", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  int refused = 0;
  bool dropped = false;
  for (int i = 0; i < 700 && !dropped; ++i) {
    protocol::MemDeclare m{protocol::kReservationTokenBit | static_cast<uint64_t>(i + 1),
                           uint64_t{2} << 20,
                           0,
                           0,
                           static_cast<uint32_t>(protocol::MemDeclareFlags::reservation),
                           0};
    if (!c.send_frame(MessageType::mem_declare, &m, sizeof m)) {
      dropped = true;
      break;
    }
    auto answer = c.receive(10s);
    if (!answer || answer->size() != sizeof(protocol::FrameHeader) + sizeof(protocol::MemReply)) {
      dropped = true;
      break;
    }
    protocol::MemReply r;
    std::memcpy(&r, answer->data() + sizeof(protocol::FrameHeader), sizeof r);
    refused += r.status == static_cast<uint32_t>(protocol::MemStatus::refused);
  }
  std::printf("[ measured ] %d requests refused before the drop\n", refused);
  EXPECT_TRUE(dropped);
  EXPECT_GE(refused, 400);
  EXPECT_LT(refused, 700);
  EXPECT_TRUE(daemon.wait_for_log("refused 500 times in a row")) << daemon.log();
  std::string log = daemon.log();
  EXPECT_LE(count_of(log, "refuse alloc pid="), 5u) << log;
}

// --- 3. bounded ctl replies --------------------------------------------------------------------

bool declare(RawClient& c, uint64_t handle, uint64_t bytes, uint32_t site) {
  protocol::MemDeclare m{handle, bytes, 0, 0, 0, site};
  if (!c.send_frame(MessageType::mem_declare, &m, sizeof m)) return false;
  return c.receive(10s).has_value();
}

bool announce(RawClient& c, uint32_t site, const std::string& text) {
  protocol::AllocSite s{};
  s.site = site;
  protocol::copy_text(s.text, text.c_str());
  return c.send_frame(MessageType::alloc_site, &s, sizeof s);
}

TEST(Hardening, DistinctSiteIdsCannotMakeJobsTooBigToSend) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient c;
  ASSERT_TRUE(c.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(c.register_job("sites", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  for (uint32_t i = 1; i <= 40; ++i) ASSERT_TRUE(announce(c, i, "frame" + std::to_string(i)));
  for (uint32_t i = 1; i <= 6000; ++i) ASSERT_TRUE(declare(c, 0x1000 * i, 4096, i));
  CtlResult jobs = run_ctl(daemon.socket, {"jobs", "-o", "json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.out << jobs.err;
  ASSERT_EQ(jobs.json["jobs"].size(), 1u);
  const json& memory = jobs.json["jobs"][0]["memory_state"];
  EXPECT_LE(memory["sites"].size(), 16u);
  EXPECT_GT(memory["sites_omitted"].get<int>(), 0);
  // Every byte is accounted for: listed sites plus the omitted ones.
  uint64_t bytes = memory["sites_omitted_bytes"].get<uint64_t>();
  for (const auto& s : memory["sites"]) bytes += s["bytes"].get<uint64_t>();
  EXPECT_EQ(bytes, 6000u * 4096u);
  EXPECT_EQ(run_ctl(daemon.socket, {"jobs", "--memory"}).exit_code, 0);
}

TEST(Hardening, ManyJobsWithLongNamesAndSitesAreCountedWhenLeftOut) {
  TempDir dir;
  Daemon daemon(dir, {{"max_clients", 400}});
  ASSERT_TRUE(daemon.start());
  std::vector<std::unique_ptr<RawClient>> clients;
  const std::string name(62, 'n');
  const std::string where(230, 'w');
  constexpr int kJobs = 150;
  for (int j = 0; j < kJobs; ++j) {
    auto c = std::make_unique<RawClient>();
    ASSERT_TRUE(c->connect(daemon.socket));
    int memfd = -1;
    ASSERT_TRUE(c->register_job(name, protocol::JobClass::opportunistic, 0, &memfd));
    ::close(memfd);
    for (uint32_t s = 1; s <= 16; ++s) {
      ASSERT_TRUE(announce(*c, s, where + std::to_string(s)));
      ASSERT_TRUE(declare(*c, 0x1000 * s, 4096, s));
    }
    clients.push_back(std::move(c));
  }
  CtlResult jobs = run_ctl(daemon.socket, {"jobs", "-o", "json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  size_t shown = jobs.json["jobs"].size();
  size_t omitted = jobs.json.value("jobs_omitted", size_t{0});
  std::printf("[ measured ] %zu jobs shown, %zu left out\n", shown, omitted);
  EXPECT_GT(omitted, 0u);
  EXPECT_EQ(shown + omitted, static_cast<size_t>(kJobs));
  CtlResult table = run_ctl(daemon.socket, {"jobs"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("more jobs not shown"), std::string::npos) << table.out;
}

// --- 5. declared is not allocated -------------------------------------------------------------

std::optional<protocol::MemStatus> declare_with(RawClient& c, uint64_t handle, uint64_t bytes,
                                                protocol::MemDeclareFlags flags) {
  protocol::MemDeclare m{handle, bytes, 0, 0, static_cast<uint32_t>(flags), 0};
  if (!c.send_frame(MessageType::mem_declare, &m, sizeof m)) return std::nullopt;
  auto answer = c.receive(10s);
  if (!answer || answer->size() != sizeof(protocol::FrameHeader) + sizeof(protocol::MemReply))
    return std::nullopt;
  protocol::MemReply r;
  std::memcpy(&r, answer->data() + sizeof(protocol::FrameHeader), sizeof r);
  return static_cast<protocol::MemStatus>(r.status);
}

TEST(Hardening, ACommitWithoutItsReservationIsCheckedLikeOne) {
  using protocol::MemDeclareFlags;
  TempDir dir;
  Daemon daemon(dir, {{"memory", {{"limits", {{"*", "1M"}}}}}});
  ASSERT_TRUE(daemon.start());
  RawClient c;
  ASSERT_TRUE(c.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(c.register_job("claims", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  // 16 MiB "committed" with no reservation before it, and as a re-declaration: both over the limit.
  EXPECT_EQ(declare_with(c, 0x10000, 16 << 20, MemDeclareFlags::committed),
            protocol::MemStatus::refused);
  EXPECT_EQ(declare_with(c, 0x20000, 16 << 20, MemDeclareFlags::redeclared),
            protocol::MemStatus::refused);
  // The shim's way: a reservation within the limit, its commit, the token's release.
  uint64_t token = protocol::kReservationTokenBit | 1;
  EXPECT_EQ(declare_with(c, token, 512 << 10, MemDeclareFlags::reservation),
            protocol::MemStatus::admitted);
  EXPECT_EQ(declare_with(c, 0x30000, 512 << 10, MemDeclareFlags::committed),
            protocol::MemStatus::admitted);
  protocol::MemRelease release{token, 0, 0};
  ASSERT_TRUE(c.send_frame(MessageType::mem_release, &release, sizeof release));
  // One reservation covers one commit.
  EXPECT_EQ(declare_with(c, 0x40000, 16 << 20, MemDeclareFlags::committed),
            protocol::MemStatus::refused);
  EXPECT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon.socket, getpid());
        return j && (*j)["memory_bytes"] == 512 << 10;
      },
      5s));
}

TEST(Hardening, AReservationNeverUsedStopsCounting) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient c;
  ASSERT_TRUE(c.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(c.register_job("squatter", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  EXPECT_EQ(declare_with(c, protocol::kReservationTokenBit | 7, 8 << 20,
                         protocol::MemDeclareFlags::reservation),
            protocol::MemStatus::admitted);
  auto job = job_with_pid(daemon.socket, getpid());
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["memory_bytes"], 8 << 20);
  // Reservations live 15 s; the tick looks once a second.
  EXPECT_TRUE(eventually(
      [&] {
        auto j = job_with_pid(daemon.socket, getpid());
        return j && (*j)["memory_bytes"] == 0;
      },
      60s, 200ms));
  EXPECT_TRUE(daemon.log_contains("expire reservation pid=" + std::to_string(getpid())))
      << daemon.log();
}

// --- 6. names are not identities ---------------------------------------------------------------

TEST(Hardening, ARuleThatNamesOnlyAJobGrantsNothingAndCheckConfigSaysSo) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"job", "serve-*"}}, {{"uid", 0}, {"job", "root-*"}}}}});
  ChildProcess check =
      ChildProcess::start({Artefacts::daemon(), "--check-config", "--config", daemon.config_path},
                          {{"PATH", "/usr/bin:/bin"}}, dir / "check.stderr");
  std::string out;
  while (auto line = check.read_line(10s)) out += *line + "\n";
  int status = check.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NE(out.find("warning: production[0]"), std::string::npos) << out;
  EXPECT_EQ(out.find("warning: production[1]"), std::string::npos) << out;

  ASSERT_TRUE(daemon.start());
  ChildProcess impostor =
      start_probe(dir, daemon.socket, probe_as("serve-x", "production", kAttacker));
  ChildProcess root = start_probe(dir, daemon.socket, probe_as("root-x", "production"));
  ASSERT_TRUE(impostor.running() && root.running());
  EXPECT_EQ((*job_with_pid(daemon.socket, impostor.pid()))["class"], "opportunistic");
  EXPECT_EQ((*job_with_pid(daemon.socket, root.pid()))["class"], "production");
}

TEST(Hardening, ANameSharedByTwoUsersNeedsAllToActOnBoth) {
  TempDir dir;
  Daemon daemon(dir, {{"production", {{{"uid", 0}}, {{"uid", kAttacker}}}}});
  ASSERT_TRUE(daemon.start());
  ChildProcess mine = start_probe(dir, daemon.socket, probe_as("shared", "production"));
  ChildProcess theirs =
      start_probe(dir, daemon.socket, probe_as("shared", "production", kAttacker));
  ASSERT_TRUE(mine.running() && theirs.running());
  CtlResult refused = run_ctl(daemon.socket, {"set-priority", "shared", "opportunistic"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("names jobs of 2 users"), std::string::npos) << refused.err;
  EXPECT_EQ((*job_with_pid(daemon.socket, theirs.pid()))["class"], "production");
  CtlResult all = run_ctl(daemon.socket, {"set-priority", "--all", "shared", "opportunistic"});
  EXPECT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ((*job_with_pid(daemon.socket, theirs.pid()))["class"], "opportunistic");
  EXPECT_EQ((*job_with_pid(daemon.socket, mine.pid()))["class"], "opportunistic");
  // A pid is never ambiguous.
  EXPECT_EQ(run_ctl(daemon.socket, {"set-limit", std::to_string(mine.pid()), "1G"}).exit_code, 0);
}

TEST(Hardening, AJobNameCannotForgeLogFields) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  RawClient c;
  ASSERT_TRUE(c.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(
      c.register_job("a uid=0 class=production", protocol::JobClass::opportunistic, 0, &memfd));
  ::close(memfd);
  ASSERT_TRUE(daemon.wait_for_log("register pid=" + std::to_string(getpid())));
  std::string log = daemon.log();
  EXPECT_NE(log.find("job=\"a uid=0 class=production\""), std::string::npos) << log;
  EXPECT_EQ(log.find("job=a uid=0"), std::string::npos) << log;
}

// --- 7. a hostile peer cannot crash the host program -------------------------------------------

// Listens where the shim expects gpushared and answers every registration with a control block
// that is not sealed; returns the memfd it sent last (the test then shrinks it).
class HostileDaemon {
 public:
  explicit HostileDaemon(const std::string& path) {
    listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ok_ = bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          listen(listener_, 16) == 0;
    memfd_ = memfd_create("hostile-control", MFD_CLOEXEC);
    ok_ = ok_ && memfd_ >= 0 && ftruncate(memfd_, protocol::kControlBlockSize) == 0;
    if (ok_) {
      // A block that would pass every other check: magic, version and job id.
      void* page =
          mmap(nullptr, protocol::kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
      auto* block = new (page) protocol::ControlBlock{};
      block->magic = protocol::kControlBlockMagic;
      block->version = protocol::kControlBlockVersion;
      block->job_id = 1;
      block->allowance.store(protocol::kUnlimited);
      munmap(page, protocol::kControlBlockSize);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~HostileDaemon() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) ::close(fd);
    ::close(listener_);
    ::close(memfd_);
  }
  bool ok() const { return ok_; }
  int memfd() const { return memfd_; }
  std::atomic<int> registrations{0};

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 50) != 1) continue;
      int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      uint8_t frame[sizeof(protocol::FrameHeader) + protocol::kMaxPayload];
      ssize_t n = recv(fd, frame, sizeof frame, 0);
      protocol::FrameHeader h{};
      if (n >= static_cast<ssize_t>(sizeof h)) std::memcpy(&h, frame, sizeof h);
      if (h.type == static_cast<uint16_t>(MessageType::register_request)) {
        protocol::RegisterReply r{};
        r.status = static_cast<uint32_t>(protocol::RegisterStatus::ok);
        r.granted_class = static_cast<uint32_t>(protocol::JobClass::opportunistic);
        r.job_id = 1;
        protocol::copy_text(r.message, "ok");
        if (protocol::send_frame(fd, MessageType::register_reply, &r, sizeof r, memfd_) ==
            protocol::SendResult::sent)
          ++registrations;
        held_.push_back(fd);  // kept open: the shim sees a live link
      } else {
        ::close(fd);  // the MPS question: no answer, no MPS
      }
    }
  }
  int listener_ = -1;
  int memfd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;
};

TEST(Hardening, TheShimRefusesAnUnsealedControlBlockAndSurvivesItsShrinking) {
  TempDir dir;
  std::string socket = dir / "hostile.sock";
  HostileDaemon hostile(socket);
  ASSERT_TRUE(hostile.ok());
  ChildProcess probe = start_probe(dir, socket, probe_as("victim"));
  ASSERT_TRUE(probe.running());
  ASSERT_TRUE(eventually([&] { return hostile.registrations.load() >= 1; }, 10s));
  // What a hostile peer does next: shrink the block under the program's mapping.
  ASSERT_EQ(ftruncate(hostile.memfd(), 0), 0);
  EXPECT_EQ(probe.ask("launch 20 0"), "ok");
  EXPECT_TRUE(probe.running());
  std::string warnings = read_file(dir / "probe.stderr");
  EXPECT_NE(warnings.find("not sealed against shrinking"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("registration refused: ok"), std::string::npos) << warnings;
}

}  // namespace
}  // namespace gpushare::testing
