// The shim sessions alone (daemon/shim_sessions.h): registrations and memory declarations
// answered over a registry and a config built here, with hooks that record what the component
// asked of the rest of the daemon (replies sent, clients dropped, memory to admit).
#include "shim_sessions.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace gpushare::daemon {
namespace {

using protocol::JobClass;

struct Sent {
  protocol::MessageType type;
  std::vector<uint8_t> payload;
  int pass_fd;
};

struct Sessions {
  Sessions() {
    ProductionRule root;
    root.uid = 0;
    config.production_rules.push_back(root);
  }
  ShimSessions make() {
    return ShimSessions(
        ShimParts{.config = config,
                  .config_path = config_path,
                  .proc_root = proc_root,
                  .registry = registry,
                  .counters = counters},
        ShimHooks{
            .reply =
                [this](Connection&, protocol::MessageType type, const void* payload, size_t length,
                       int pass_fd) {
                  const auto* bytes = static_cast<const uint8_t*>(payload);
                  sent.push_back({type, {bytes, bytes + length}, pass_fd});
                  return client_reads;
                },
            .drop = [this](int /*fd*/, const std::string& why) { dropped.push_back(why); },
            .registered = [this](Connection&) { ++registered; },
            .warn = [](const std::string&, const std::string&) {},
            .mps_client = [this](pid_t pid) { return pid == mps_pid; },
            .admit_memory = [this](Connection&, Job&,
                                   const protocol::MemDeclare& m) { admitted.push_back(m.handle); },
            .memory_released = [this](Job&, int device) { released.push_back(device); },
            .jobs_changed = [this] { ++jobs_changed; }});
  }
  // The last reply sent, as a registration reply.
  protocol::RegisterReply last_reply() const {
    protocol::RegisterReply reply{};
    EXPECT_FALSE(sent.empty());
    if (sent.empty()) return reply;
    EXPECT_EQ(sent.back().type, protocol::MessageType::register_reply);
    EXPECT_EQ(sent.back().payload.size(), sizeof reply);
    std::memcpy(&reply, sent.back().payload.data(), sizeof reply);
    return reply;
  }

  Config config;
  std::string config_path = "/etc/gpushare/gpushared.json";
  std::string proc_root = "/nonexistent-proc";
  Registry registry;
  DaemonCounters counters;
  bool client_reads = true;  // what the reply hook answers
  pid_t mps_pid = -1;
  std::vector<Sent> sent;
  std::vector<std::string> dropped;
  std::vector<uint64_t> admitted;
  std::vector<int> released;
  int registered = 0, jobs_changed = 0;
};

Connection connection(int fd, pid_t pid, uid_t uid) {
  Connection c;
  c.fd = fd;
  c.peer.pid = pid;
  c.peer.uid = uid;
  c.peer.gid = uid;
  return c;
}

protocol::RegisterRequest request(JobClass wanted, const char* name, uint32_t client_pid = 1) {
  protocol::RegisterRequest r{};
  r.requested_class = static_cast<uint32_t>(wanted);
  r.client_pid = client_pid;
  std::strncpy(r.job_name, name, sizeof r.job_name - 1);
  return r;
}

// Registers `c` as an opportunistic job named `name`; its job in the registry, or nullptr.
Job* register_job(Sessions& s, ShimSessions& shims, Connection& c, const char* name) {
  shims.on_register(c, request(JobClass::opportunistic, name));
  return s.registry.find(c.job_id);
}

TEST(ShimSessions, AMalformedRegistrationIsAnsweredWithWhatWasWrongThenDropped) {
  Sessions s;
  ShimSessions shims = s.make();
  Connection c = connection(5, 100, 1000);
  protocol::RegisterRequest r = request(JobClass::opportunistic, "train");
  r.requested_class = 7;
  shims.on_register(c, r);
  EXPECT_EQ(s.last_reply().status, static_cast<uint32_t>(protocol::RegisterStatus::bad_request));
  EXPECT_STREQ(s.last_reply().message, "requested class 7 is not 0 or 1");
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "bad registration: requested class 7 is not 0 or 1");
  EXPECT_EQ(s.registry.size(), 0u);
  EXPECT_EQ(s.registered, 0);

  EXPECT_EQ(registration_problem(request(JobClass::production, "")), "job name is empty");
  protocol::RegisterRequest devices = request(JobClass::production, "a");
  devices.device_count = 1;
  devices.devices[0] = -1;
  EXPECT_EQ(registration_problem(devices), "device index -1 is out of range");
  devices.device_count = protocol::kMaxDevices + 1;
  EXPECT_NE(registration_problem(devices).find("device_count"), std::string::npos);
  protocol::RegisterRequest unterminated = request(JobClass::production, "a");
  std::memset(unterminated.job_name, 'x', sizeof unterminated.job_name);
  EXPECT_EQ(registration_problem(unterminated), "job name is not NUL-terminated");
}

// The class comes from the kernel's identity of the peer (its Connection), never from the request:
// a user without a production rule is registered as opportunistic, told why, and counted.
TEST(ShimSessions, ProductionIsGrantedOnlyWhereARuleMatchesTheKernelIdentity) {
  Sessions s;
  ShimSessions shims = s.make();
  Connection user = connection(5, 100, 1000);
  shims.on_register(user, request(JobClass::production, "serve", /*client_pid=*/0));
  protocol::RegisterReply refused = s.last_reply();
  EXPECT_EQ(refused.status, static_cast<uint32_t>(protocol::RegisterStatus::ok));
  EXPECT_EQ(refused.granted_class, static_cast<uint32_t>(JobClass::opportunistic));
  EXPECT_STREQ(refused.message,
               "production refused: no production rule in /etc/gpushare/gpushared.json matches "
               "uid 1000, gid 1000, job 'serve'; registered as opportunistic");
  EXPECT_EQ(s.counters.refusals[static_cast<size_t>(Refusal::production)], 1u);

  Connection root = connection(6, 200, 0);
  shims.on_register(root, request(JobClass::production, "serve"));
  protocol::RegisterReply granted = s.last_reply();
  EXPECT_EQ(granted.granted_class, static_cast<uint32_t>(JobClass::production));
  EXPECT_STREQ(granted.message, "registered");
  EXPECT_GE(s.sent.back().pass_fd, 0);  // the control block goes with the reply

  ASSERT_EQ(s.registry.size(), 2u);
  Job* job = s.registry.find(refused.job_id);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->peer.uid, 1000u);
  EXPECT_EQ(job->peer.pid, 100);  // SO_PEERCRED's, not the client's own view (0 here)
  EXPECT_EQ(job->requested, JobClass::production);
  EXPECT_EQ(job->granted, JobClass::opportunistic);
  EXPECT_EQ(job->block.page()->job_class.load(), static_cast<uint32_t>(JobClass::opportunistic));
  EXPECT_EQ(user.job_id, refused.job_id);
  EXPECT_EQ(s.registered, 2);
  EXPECT_EQ(s.jobs_changed, 2);
  EXPECT_TRUE(s.dropped.empty());
}

TEST(ShimSessions, AClientGoneBeforeItsReplyRegistersNothing) {
  Sessions s;
  s.client_reads = false;
  ShimSessions shims = s.make();
  Connection c = connection(5, 100, 0);
  shims.on_register(c, request(JobClass::production, "serve"));
  EXPECT_EQ(s.registry.size(), 0u);
  EXPECT_EQ(s.registered, 0);
  EXPECT_EQ(s.jobs_changed, 0);
}

// A job name is the client's choice: shown, never trusted to be printable.
TEST(ShimSessions, AJobNameCannotForgeALogLine) {
  Sessions s;
  ShimSessions shims = s.make();
  Connection c = connection(5, 100, 1000);
  Job* job = register_job(s, shims, c, "a\nuid=0\x7f");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->name, "a?uid=0?");
}

TEST(ShimSessions, AProcessToldToBeAnMpsClientIsOne) {
  Sessions s;
  s.mps_pid = 100;
  ShimSessions shims = s.make();
  Connection client = connection(5, 100, 1000), other = connection(6, 101, 1000);
  shims.on_register(client, request(JobClass::opportunistic, "a"));
  shims.on_register(other, request(JobClass::opportunistic, "b"));
  EXPECT_TRUE(s.registry.find(client.job_id)->mps_client);
  EXPECT_FALSE(s.registry.find(other.job_id)->mps_client);
}

protocol::MemDeclare declare(uint64_t handle, uint64_t bytes, int device = 0) {
  protocol::MemDeclare m{};
  m.handle = handle;
  m.bytes = bytes;
  m.device = device;
  return m;
}

TEST(ShimSessions, AMalformedDeclarationNamesWhatWasWrong) {
  EXPECT_EQ(declaration_problem(declare(1, 10), 0, false), "");
  EXPECT_EQ(declaration_problem(declare(1, 10, -1), 0, false), "declared memory on device -1");
  EXPECT_EQ(declaration_problem(declare(1, kMaxAllocationBytes + 1), 0, false),
            "declared an implausible allocation of " + std::to_string(kMaxAllocationBytes + 1) +
                " bytes");
  protocol::MemDeclare kind = declare(1, 10);
  kind.kind = protocol::kMaxAllocKind + 1;
  EXPECT_EQ(declaration_problem(kind, 0, false), "declared memory with unknown kind/flags");
  protocol::MemDeclare untokened = declare(1, 10);
  untokened.flags = static_cast<uint32_t>(protocol::MemDeclareFlags::reservation);
  EXPECT_NE(declaration_problem(untokened, 0, false).find("reservation without a token"),
            std::string::npos);
  EXPECT_NE(declaration_problem(declare(protocol::kReservationTokenBit | 1, 10), 0, false)
                .find("token without a reservation"),
            std::string::npos);
  // At the per-job cap a new allocation is refused; a known one may be declared again.
  EXPECT_NE(declaration_problem(declare(1, 10), kMaxAllocationsPerJob, false).find("more than"),
            std::string::npos);
  EXPECT_EQ(declaration_problem(declare(1, 10), kMaxAllocationsPerJob, true), "");
}

TEST(ShimSessions, DeclarationsAndReleasesReachTheMemoryBrokerOnlyWhenWellFormed) {
  Sessions s;
  ShimSessions shims = s.make();
  Connection stranger = connection(4, 99, 1000);
  shims.on_mem_declare(stranger, declare(1, 10));  // no job behind the connection
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "declared memory without a job");

  Connection c = connection(5, 100, 1000);
  shims.on_register(c, request(JobClass::opportunistic, "a"));
  shims.on_mem_declare(c, declare(0x10, 1 << 20));
  shims.on_mem_declare(c, declare(0x20, 1 << 20, protocol::kMaxDeviceIndex + 1));
  EXPECT_EQ(s.admitted, std::vector<uint64_t>{0x10});
  ASSERT_EQ(s.dropped.size(), 2u);
  EXPECT_EQ(s.dropped[1],
            "declared memory on device " + std::to_string(protocol::kMaxDeviceIndex + 1));

  Job* job = s.registry.find(c.job_id);
  ASSERT_NE(job, nullptr);
  job->set_allocation({0, 0x10}, DeclaredAllocation{.bytes = 1 << 20});
  protocol::MemRelease unknown{.handle = 0x30, .device = 0, .reserved = 0};
  shims.on_mem_release(c, unknown);  // normal after a reconnect: ignored
  EXPECT_TRUE(s.released.empty());
  protocol::MemRelease known{.handle = 0x10, .device = 0, .reserved = 0};
  shims.on_mem_release(c, known);
  EXPECT_EQ(s.released, std::vector<int>{0});
  EXPECT_TRUE(job->memory.empty());
  protocol::MemRelease odd{.handle = 0x10, .device = 0, .reserved = 1};
  shims.on_mem_release(c, odd);
  EXPECT_EQ(s.dropped.back(), "released memory with a non-zero reserved field");
}

TEST(ShimSessions, AClassChangeReachesTheJobAndItsShim) {
  Sessions s;
  ShimSessions shims = s.make();
  Connection c = connection(5, 100, 1000);
  Job* job = register_job(s, shims, c, "a");
  ASSERT_NE(job, nullptr);
  const uint32_t seq = job->block.page()->gate_seq.load();
  Peer admin;
  admin.uid = 0;
  shims.set_job_class(*job, JobClass::production, admin);
  EXPECT_EQ(job->granted, JobClass::production);
  EXPECT_EQ(job->block.page()->job_class.load(), static_cast<uint32_t>(JobClass::production));
  EXPECT_NE(job->block.page()->gate_seq.load(), seq);  // waiters woken to read it
}

}  // namespace
}  // namespace gpushare::daemon
