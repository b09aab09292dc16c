// The ctl service alone (daemon/ctl_service.h): requests answered from components built here,
// with hooks that record what the service asked of the rest of the daemon.
#include "ctl_service.h"

#include <gtest/gtest.h>

namespace gpushare::daemon {
namespace {

using nlohmann::json;

struct Service {
  Service() {
    config.default_policy = "none";
    policies.configure(config);
  }
  CtlService make() {
    return CtlService(
        CtlParts{.config = config,
                 .registry = registry,
                 .policies = policies,
                 .memory = memory,
                 .inventory = inventory,
                 .counters = counters},
        CtlHooks{
            .facts =
                [] {
                  DaemonFacts facts;
                  facts.config_path = "/etc/g.json";
                  return facts;
                },
            .known_devices =
                [] {
                  return std::set<int>{0, 3};
                },
            .rotation = [](int) { return json(nullptr); },
            .policy_state =
                [](int device) {
                  if (device != 3) return json(nullptr);
                  return json{{"production_progress", 0.97}, {"explanation", "budget beside=0.02"}};
                },
            .set_class = [](Job&, protocol::JobClass, const Peer&) {},
            .reload =
                [this] {
                  ++reloads;
                  ConfigResult result;
                  result.config = config;
                  return result;
                }});
  }
  Config config;
  Registry registry;
  PolicyTable policies;
  MemoryBroker memory;
  GpuInventory inventory;
  DaemonCounters counters;
  int reloads = 0;
};

Peer peer(pid_t pid, uid_t uid) {
  Peer p;
  p.pid = pid;
  p.uid = uid;
  p.gid = uid;
  return p;
}
const Peer kRoot = peer(10, 0);
const Peer kUser = peer(11, 1000);

size_t refusals(const DaemonCounters& counters, Refusal r) {
  return counters.refusals[static_cast<size_t>(r)];
}

TEST(CtlService, AnUnknownCommandOrAFieldOfTheWrongTypeIsAnsweredNotThrown) {
  Service s;
  CtlService ctl = s.make();
  json unknown = ctl.answer(kRoot, {{"command", "explode"}});
  EXPECT_FALSE(unknown["ok"]);
  EXPECT_EQ(unknown["error"], "unknown command \"explode\"");
  json malformed =
      ctl.answer(kRoot, {{"command", "policy"}, {"device", "zero"}, {"policy", "tgs"}});
  EXPECT_FALSE(malformed["ok"]);
  EXPECT_NE(malformed["error"].get<std::string>().find("malformed request"), std::string::npos);
}

// Identity is the caller's Peer (its connection's SO_PEERCRED), never a field of the request.
TEST(CtlService, OnlyAnAdministratorChangesAPolicyOrReloads) {
  Service s;
  CtlService ctl = s.make();
  const json choose = {{"command", "policy"}, {"device", 0}, {"policy", "tgs"}, {"uid", 0}};
  json refused = ctl.answer(kUser, choose);
  EXPECT_FALSE(refused["ok"]);
  EXPECT_EQ(refused["error"].get<std::string>().rfind("refused: ", 0), 0u) << refused.dump();
  EXPECT_EQ(s.policies.policy_for(0), "none");
  EXPECT_EQ(refusals(s.counters, Refusal::policy), 1u);

  json chosen = ctl.answer(kRoot, choose);
  EXPECT_TRUE(chosen["ok"]) << chosen.dump();
  EXPECT_EQ(chosen["from"], "none");
  EXPECT_EQ(s.policies.policy_for(0), "tgs");
  EXPECT_TRUE(chosen["parameters"].contains("target"));  // every parameter in force, defaults too

  EXPECT_FALSE(ctl.answer(kUser, {{"command", "reload"}})["ok"]);
  EXPECT_EQ(s.reloads, 0);
  EXPECT_EQ(refusals(s.counters, Refusal::reload), 1u);
  json reloaded = ctl.answer(kRoot, {{"command", "reload"}});
  EXPECT_TRUE(reloaded["ok"]);
  EXPECT_EQ(reloaded["config"], "/etc/g.json");
  EXPECT_EQ(s.reloads, 1);
}

TEST(CtlService, EveryRefusalNamesWhatWasWrong) {
  Service s;
  CtlService ctl = s.make();
  auto error = [&](const json& request) {
    json a = ctl.answer(kRoot, request);
    EXPECT_FALSE(a["ok"]) << request.dump();
    return a.value("error", std::string());
  };
  EXPECT_EQ(error({{"command", "set-priority"}, {"class", "production"}}),
            "give \"pid\" or \"job\"");
  EXPECT_EQ(error({{"command", "set-priority"}, {"class", "gold"}, {"pid", 1}}),
            "\"class\" must be \"production\" or \"opportunistic\"");
  EXPECT_EQ(error({{"command", "set-priority"}, {"class", "production"}, {"pid", 4242}}),
            "no registered job with pid 4242");
  EXPECT_NE(error({{"command", "policy"}, {"device", 0}, {"policy", "fastest"}}).find("fastest"),
            std::string::npos);
  EXPECT_NE(error({{"command", "policy"}, {"device", -1}, {"policy", "tgs"}}).find("device must"),
            std::string::npos);
  EXPECT_EQ(error({{"command", "set-limit"}, {"pid", 1}}),
            "give \"bytes\" (a number, or null for none)");
  EXPECT_NE(error({{"command", "set-limit"}, {"pid", 1}, {"bytes", 0}}).find("0 bytes"),
            std::string::npos);
  EXPECT_EQ(error({{"command", "set-limit"}, {"pid", 4242}, {"bytes", "8G"}}),
            "no registered job with pid 4242");
  EXPECT_NE(error({{"command", "policy"}, {"device", 0}, {"policy", "tgs"}, {"parameters", "x=1"}})
                .find("policy tgs"),
            std::string::npos);
}

TEST(CtlService, StatusListsTheDevicesTheDaemonKnowsAndJobsAnEmptyList) {
  Service s;
  CtlService ctl = s.make();
  json status = ctl.answer(kUser, {{"command", "status"}});
  ASSERT_TRUE(status["ok"]) << status.dump();
  std::vector<int> devices;
  for (const json& d : status["devices"]) devices.push_back(d["device"].get<int>());
  EXPECT_EQ(devices, (std::vector<int>{0, 3}));
  EXPECT_EQ(status["daemon"]["config"], "/etc/g.json");
  // What each device's policy believes, where it has decided.
  EXPECT_TRUE(status["devices"][0]["policy_state"].is_null()) << status.dump();
  EXPECT_EQ(status["devices"][1]["policy_state"]["explanation"], "budget beside=0.02");
  EXPECT_EQ(status["devices"][1]["policy_state"]["production_progress"], 0.97);
  json jobs = ctl.answer(kUser, {{"command", "jobs"}});
  ASSERT_TRUE(jobs["ok"]);
  EXPECT_TRUE(jobs["jobs"].empty());
  EXPECT_FALSE(jobs.contains("jobs_omitted"));
}

}  // namespace
}  // namespace gpushare::daemon
