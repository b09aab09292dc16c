// The MPS sessions alone (daemon/mps_sessions.h): the shim's MPS question and the ctl's `mps`
// command answered over a config built here, with hooks that stand in for the supervisor and
// record what the component sent and dropped.
#include "mps_sessions.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace gpushare::daemon {
namespace {

using protocol::JobClass;
using protocol::MpsStatus;

struct Sessions {
  Sessions() {
    ProductionRule root;
    root.uid = 0;
    config.production_rules.push_back(root);
    service.available = true;
    service.pipe_directory = "/run/gpushare/mps/pipe";
  }
  MpsSessions make() {
    return MpsSessions(
        MpsParts{.config = config, .proc_root = proc_root, .clients = clients},
        MpsHooks{.reply =
                     [this](Connection&, protocol::MessageType type, const void* payload,
                            size_t length) {
                       const auto* bytes = static_cast<const uint8_t*>(payload);
                       sent.push_back({type, {bytes, bytes + length}});
                       return true;
                     },
                 .drop = [this](int, const std::string& why) { dropped.push_back(why); },
                 .service = [this] { return service; },
                 .mode = [this] { return mode; },
                 .status =
                     [] {
                       return nlohmann::json{{"state", "running"}};
                     },
                 .alive = [this](pid_t pid) { return alive.count(pid) != 0; }});
  }
  // The last reply, as an MPS reply.
  protocol::MpsReply last_reply() const {
    protocol::MpsReply reply{};
    EXPECT_FALSE(sent.empty());
    if (sent.empty()) return reply;
    EXPECT_EQ(sent.back().type, protocol::MessageType::mps_reply);
    EXPECT_EQ(sent.back().payload.size(), sizeof reply);
    std::memcpy(&reply, sent.back().payload.data(), sizeof reply);
    return reply;
  }

  struct Sent {
    protocol::MessageType type;
    std::vector<uint8_t> payload;
  };
  Config config;
  std::string proc_root = "/nonexistent-proc";
  MpsClients clients;
  MpsService service;
  MpsMode mode = MpsMode::automatic;
  std::set<pid_t> alive;
  std::vector<Sent> sent;
  std::vector<std::string> dropped;
};

Connection connection(pid_t pid, uid_t uid) {
  Connection c;
  c.fd = 7;
  c.peer.pid = pid;
  c.peer.uid = uid;
  c.peer.gid = uid;
  return c;
}

protocol::MpsQuery query(JobClass wanted, const char* name) {
  protocol::MpsQuery q{};
  q.requested_class = static_cast<uint32_t>(wanted);
  std::strncpy(q.job_name, name, sizeof q.job_name - 1);
  return q;
}

TEST(MpsSessions, AMalformedQueryIsDroppedWithWhatWasWrong) {
  Sessions s;
  MpsSessions sessions = s.make();
  Connection c = connection(100, 0);
  protocol::MpsQuery q = query(JobClass::production, "serve");
  q.requested_class = 3;
  sessions.on_query(c, q);
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "bad mps_query: requested class 3 is not 0 or 1");
  EXPECT_TRUE(s.sent.empty());
  EXPECT_EQ(s.clients.size(), 0u);

  protocol::MpsQuery reserved = query(JobClass::production, "serve");
  reserved.reserved = 1;
  EXPECT_EQ(mps_query_problem(reserved), "reserved field is not 0");
  EXPECT_EQ(mps_query_problem(query(JobClass::production, "")), "job name is empty");
  protocol::MpsQuery unterminated = query(JobClass::production, "a");
  std::memset(unterminated.job_name, 'x', sizeof unterminated.job_name);
  EXPECT_EQ(mps_query_problem(unterminated), "job name is not NUL-terminated");
}

// A reply telling the job to run as an MPS client of `granted` class with these settings.
void expect_use_mps(const protocol::MpsReply& reply, JobClass granted, uint32_t priority,
                    uint32_t thread_percentage) {
  EXPECT_EQ(reply.status, static_cast<uint32_t>(MpsStatus::use_mps));
  EXPECT_EQ(reply.granted_class, static_cast<uint32_t>(granted));
  EXPECT_EQ(reply.client_priority, priority);
  EXPECT_EQ(reply.active_thread_percentage, thread_percentage);
}

// Production's settings go only to a peer a production rule matches by its kernel identity; any
// other peer asking for production is answered as the opportunistic job it will register as.
TEST(MpsSessions, TheClassAndItsSettingsComeFromTheKernelIdentity) {
  Sessions s;
  s.config.mps.thread_percentage = 30;
  MpsSessions sessions = s.make();
  Connection root = connection(100, 0);
  sessions.on_query(root, query(JobClass::production, "serve"));
  const protocol::MpsReply production = s.last_reply();
  expect_use_mps(production, JobClass::production, 0, 0);
  EXPECT_STREQ(production.pipe_directory, "/run/gpushare/mps/pipe");
  EXPECT_TRUE(s.clients.contains(100));

  s.alive = {100};
  s.config.production_rules[0].uid = 1;  // a reload: no rule matches root any more
  Connection claims = connection(101, 0);
  sessions.on_query(claims, query(JobClass::production, "serve"));
  expect_use_mps(s.last_reply(), JobClass::opportunistic, 1, 30);
  EXPECT_TRUE(s.dropped.empty());
}

// MPS off says nothing to the job; MPS down says why; another user's server is refused, so that
// the job runs time-sliced instead of waiting in cuInit.
TEST(MpsSessions, NoMpsIsAnsweredWithWhyWhereThereIsAReason) {
  Sessions s;
  MpsSessions sessions = s.make();
  s.mode = MpsMode::off;
  s.service.available = false;
  s.service.unavailable = "MPS is off";
  Connection c = connection(100, 1000);
  sessions.on_query(c, query(JobClass::opportunistic, "train"));
  EXPECT_EQ(s.last_reply().status, static_cast<uint32_t>(MpsStatus::no_mps));
  EXPECT_STREQ(s.last_reply().message, "");

  s.mode = MpsMode::external;
  s.service.unavailable = "no MPS control daemon at /tmp/nvidia-mps";
  sessions.on_query(c, query(JobClass::opportunistic, "train"));
  EXPECT_STREQ(s.last_reply().message, "no MPS control daemon at /tmp/nvidia-mps");

  s.mode = MpsMode::automatic;
  s.service.available = true;
  Connection first = connection(200, 1000);
  sessions.on_query(first, query(JobClass::opportunistic, "train"));
  EXPECT_EQ(s.last_reply().status, static_cast<uint32_t>(MpsStatus::use_mps));
  s.alive = {200};
  Connection other = connection(300, 2000);
  sessions.on_query(other, query(JobClass::opportunistic, "train"));
  EXPECT_EQ(s.last_reply().status, static_cast<uint32_t>(MpsStatus::no_mps));
  EXPECT_NE(std::string(s.last_reply().message).find("serves uid 1000"), std::string::npos)
      << s.last_reply().message;
  EXPECT_FALSE(s.clients.contains(300));
  s.alive.clear();  // the first user's client exited: the next user may become a client
  sessions.on_query(other, query(JobClass::opportunistic, "train"));
  EXPECT_EQ(s.last_reply().status, static_cast<uint32_t>(MpsStatus::use_mps));
}

// Hands a ctl request's text to the sessions; whether they answered it.
bool ask(MpsSessions& sessions, Connection& c, const std::string& text) {
  return sessions.answer_ctl(c, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

TEST(MpsSessions, TheCtlsMpsCommandIsAnsweredAndOthersAreLeftToTheCtlService) {
  Sessions s;
  s.config.mps.thread_percentage = 20;
  MpsSessions sessions = s.make();
  Connection c = connection(100, 0);
  EXPECT_FALSE(ask(sessions, c, R"({"command":"jobs"})"));
  EXPECT_FALSE(ask(sessions, c, "{not json"));
  EXPECT_TRUE(s.sent.empty());
  EXPECT_TRUE(ask(sessions, c, R"({"command":"mps"})"));
  ASSERT_EQ(s.sent.size(), 1u);
  EXPECT_EQ(s.sent[0].type, protocol::MessageType::ctl_reply);
  const nlohmann::json answer = nlohmann::json::parse(s.sent[0].payload);
  EXPECT_EQ(answer["ok"], true);
  EXPECT_EQ(answer["mps"]["state"], "running");
  EXPECT_EQ(answer["mps"]["thread_percentage"], 20);
}

}  // namespace
}  // namespace gpushare::daemon
