// The configuration parser: every field validated, errors naming the JSON path.
#include "config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "authorization.h"

namespace gpushare::daemon {
namespace {

std::string errors_of(const char* text) {
  return parse_config(text).error_text();
}

TEST(Config, EmptyObjectGivesTheDocumentedDefaults) {
  ConfigResult r = parse_config("{}");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->socket_path, "/run/gpushare/gpushared.sock");
  EXPECT_EQ(r.config->socket_mode, 0666u);
  EXPECT_EQ(r.config->tick.count(), 50);
  EXPECT_EQ(r.config->default_policy, "none");
  EXPECT_TRUE(r.config->production_rules.empty());
}

TEST(Config, FullExampleParses) {
  ConfigResult r = parse_config(R"({
    "socket": {"path": "/tmp/x.sock", "mode": "0660", "group": "root"},
    "admin_group": 0,
    "production": [{"uid": 1000}, {"user": "root", "job": "serve-*"}, {"group": "root"}, {"gid": 5}],
    "policy": {"default": "none", "devices": {"0": "none", "3": "none"}},
    "tick_ms": 20, "max_clients": 64, "log_level": "debug"})");
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->socket_mode, 0660u);
  EXPECT_EQ(r.config->socket_group, 0u);
  EXPECT_EQ(r.config->admin_group, 0u);
  ASSERT_EQ(r.config->production_rules.size(), 4u);
  EXPECT_EQ(r.config->production_rules[1].uid, 0u);
  EXPECT_EQ(r.config->production_rules[1].job, "serve-*");
  EXPECT_EQ(r.config->device_policies.at(3), "none");
  EXPECT_EQ(r.config->tick.count(), 20);
}

TEST(Config, ErrorsNameThePathAndWhatWasExpected) {
  EXPECT_EQ(errors_of(R"({"tick_ms": "fast"})"),
            R"(tick_ms: expected an integer in [10, 1000], got "fast")");
  EXPECT_EQ(errors_of(R"({"tick_ms": 5000})"),
            "tick_ms: expected an integer in [10, 1000], got 5000");
  EXPECT_EQ(errors_of(R"({"socket": {"mode": 660}})"),
            R"(socket.mode: expected an octal permission string such as "0660", got 660)");
  EXPECT_EQ(errors_of(R"({"socket": {"path": "relative.sock"}})"),
            R"(socket.path: expected an absolute path of at most 107 bytes, got "relative.sock")");
  EXPECT_EQ(errors_of(R"({"production": [{"uid": 1}, {"uid": -3}]})"),
            "production[1].uid: expected an integer in [0, 4294967294], got -3");
  EXPECT_EQ(errors_of(R"({"production": [{}]})"),
            "production[0]: a rule must name at least one of uid, user, gid, group, job, pod_uid, "
            "container_id, qos, resource, namespace, pod");
  EXPECT_EQ(errors_of(R"({"production": [{"user": "no-such-user-gpushare"}]})"),
            R"(production[0].user: no user named "no-such-user-gpushare")");
  EXPECT_EQ(errors_of(R"({"admin_group": "no-such-group-gpushare"})"),
            R"(admin_group: no group named "no-such-group-gpushare")");
  EXPECT_EQ(
      errors_of(R"({"policy": {"devices": {"0": "fastest"}}})"),
      R"(policy.devices.0: unknown policy "fastest" (expected one of: harvest, tgs, priority, fair, none))");
  EXPECT_EQ(errors_of(R"({"policy": {"devices": {"gpu0": "none"}}})"),
            "policy.devices.gpu0: a device key must be a device index 0..1023");
  EXPECT_EQ(errors_of(R"({"log_level": "loud"})"),
            R"(log_level: expected one of trace, debug, info, warn, error, got "loud")");
}

// Found by tests/fuzz/config_fuzz.cpp: nlohmann reports a number beyond a double's range as
// out_of_range, not parse_error, and it escaped parse_config (the daemon died on a SIGHUP reload).
TEST(Config, ANumberTooLargeForADoubleIsAnErrorNotAnException) {
  for (const char* text : {R"({"tick_ms": 1e400})", "8883333333333333333333e33333",
                           R"({"policy": {"parameters": {"tgs": {"target": -1e99999}}}})"}) {
    ConfigResult r;
    ASSERT_NO_THROW(r = parse_config(text)) << text;
    EXPECT_FALSE(r.config) << text;
    ASSERT_EQ(r.errors.size(), 1u) << text;
    EXPECT_NE(r.errors[0].find("not valid JSON"), std::string::npos) << r.errors[0];
  }
}

// memory.rotation (docs/memory.md, "Rotating residency"): every key checked, refusals name it.
TEST(Config, RotationParsesAndResolvesFixedNamesToJobs) {
  ConfigResult r = parse_config(R"({"memory": {"oversubscribe": true, "rotation": {
    "enabled": true, "order": "fixed", "fixed_order": ["b", "a"], "prefetch": false,
    "min_turn_ms": 250, "turn_per_swap_in": 2.5}}})");
  ASSERT_TRUE(r.config) << r.error_text();
  const RotationConfig& rotation = r.config->memory.rotation;
  EXPECT_TRUE(rotation.enabled);
  EXPECT_EQ(rotation.order, policies::RotationOrder::fixed);
  policies::RotationParameters p = rotation.parameters([](const std::string& name) {
    return name == "a" ? std::vector<uint64_t>{3, 5} : std::vector<uint64_t>{4};
  });
  EXPECT_EQ(p.fixed_order, (std::vector<uint64_t>{4, 3, 5}));
  EXPECT_FALSE(p.prefetch);
  EXPECT_DOUBLE_EQ(p.min_turn_s, 0.25);
  EXPECT_DOUBLE_EQ(p.turn_per_swap_in, 2.5);

  ConfigResult defaults = parse_config(R"({"memory": {"oversubscribe": true}})");
  ASSERT_TRUE(defaults.config);
  EXPECT_FALSE(defaults.config->memory.rotation.enabled) << "opt-in, like oversubscription";
  EXPECT_EQ(defaults.config->memory.rotation.order, policies::RotationOrder::weight);
  EXPECT_TRUE(defaults.config->memory.rotation.prefetch);
  EXPECT_EQ(defaults.config->memory.rotation.min_turn.count(), 1000);
}

TEST(Config, EveryBadRotationValueIsRefusedNamingItsKey) {
  auto rotation = [](const std::string& body) {
    return errors_of((R"({"memory": {"oversubscribe": true, "rotation": )" + body + "}}").c_str());
  };
  EXPECT_EQ(errors_of(R"({"memory": {"rotation": {"enabled": true}}})"),
            R"(memory.rotation.enabled: needs "memory": {"oversubscribe": true} (only swappable )"
            "memory can take turns on the device)");
  EXPECT_EQ(rotation("[]"),
            R"(memory.rotation: expected an object such as {"enabled": true}, got [])");
  EXPECT_EQ(rotation(R"({"enabled": "yes"})"),
            R"(memory.rotation.enabled: expected true or false, got "yes")");
  EXPECT_EQ(rotation(R"({"prefetch": 1})"),
            "memory.rotation.prefetch: expected true or false, got 1");
  EXPECT_EQ(rotation(R"({"order": "random"})"),
            R"(memory.rotation.order: expected "weight", "fifo" or "fixed", got "random")");
  EXPECT_EQ(rotation(R"({"order": "fixed"})"),
            R"(memory.rotation.fixed_order: "order": "fixed" needs the list of job names)");
  EXPECT_EQ(
      rotation(R"({"order": "fixed", "fixed_order": []})"),
      "memory.rotation.fixed_order: expected a list of job names of 1 to 63 characters, got []");
  EXPECT_EQ(
      rotation(R"({"order": "fixed", "fixed_order": ["a", 2]})"),
      R"(memory.rotation.fixed_order: expected a list of job names of 1 to 63 characters, got ["a",2])");
  EXPECT_EQ(rotation(R"({"fixed_order": ["a"]})"),
            R"(memory.rotation.fixed_order: used only with "order": "fixed")");
  EXPECT_EQ(rotation(R"({"min_turn_ms": 5})"),
            "memory.rotation.min_turn_ms: expected an integer in [10, 3600000], got 5");
  EXPECT_EQ(rotation(R"({"min_turn_ms": 1.5})"),
            "memory.rotation.min_turn_ms: expected an integer in [10, 3600000], got 1.5");
  EXPECT_EQ(rotation(R"({"turn_per_swap_in": -1})"),
            "memory.rotation.turn_per_swap_in: expected a number in [0, 1000], got -1");
  EXPECT_EQ(errors_of(R"({"memory": {"trace": "trace.jsonl"}})"),
            R"(memory.trace: expected an absolute file path, got "trace.jsonl")");
  EXPECT_EQ(errors_of(R"({"memory": {"trace": 1}})"),
            "memory.trace: expected an absolute file path, got 1");
  EXPECT_EQ(rotation(R"({"turn": 3})"),
            "memory.rotation.turn: unknown field (expected one of: enabled, fixed_order, "
            "growth_quiet_ms, min_turn_ms, order, prefetch, turn_per_swap_in)");
  EXPECT_EQ(rotation(R"({"growth_quiet_ms": -1})"),
            "memory.rotation.growth_quiet_ms: expected an integer in [0, 600000], got -1");
}

TEST(Config, EveryPolicyOfTheRegistryIsAvailable) {
  for (const char* name : {"harvest", "tgs", "priority", "fair", "none"})
    EXPECT_EQ(errors_of((std::string(R"({"policy": {"default": ")") + name + R"("}})").c_str()), "")
        << name;
}

TEST(Config, PolicyParametersAreCheckedByThePolicyItself) {
  ConfigResult ok = parse_config(R"({"policy": {"default": "tgs", "parameters": {"tgs": {"target": 0.9}}}})");
  ASSERT_TRUE(ok.config) << ok.error_text();
  EXPECT_EQ(ok.config->policy_parameters.at("tgs").at("target"), 0.9);
  std::string out_of_range = errors_of(R"({"policy": {"parameters": {"tgs": {"target": 2}}}})");
  EXPECT_NE(out_of_range.find("policy.parameters.tgs: "), std::string::npos) << out_of_range;
  EXPECT_NE(out_of_range.find("target"), std::string::npos) << out_of_range;
  EXPECT_EQ(errors_of(R"({"policy": {"parameters": {"tgs": {"target": "high"}}}})"),
            R"(policy.parameters.tgs.target: expected a number, got "high")");
  // Kernel-level idle gating is a capability of this daemon and shim (a policy needing one they
  // lack is refused: tests/policies/registry_test.cpp).
  EXPECT_TRUE(parse_config(R"({"policy": {"parameters": {"priority": {"kernel_gating": 1}}}})").config);
  EXPECT_TRUE(parse_config(R"({"policy": {"parameters": {"priority": {"kernel_gating": 0}}}})").config);
  EXPECT_NE(errors_of(R"({"policy": {"parameters": {"fastest": {}}}})").find(
                R"(policy.parameters.fastest: unknown policy "fastest")"),
            std::string::npos);
}

TEST(Config, UnknownFieldsAreErrorsNotSilentDefaults) {
  EXPECT_EQ(
      errors_of(R"({"tick": 50})"),
      "tick: unknown field (expected one of: admin_group, kubernetes, log_level, max_clients, "
      "memory, metrics, mps, mps_pipe_directory, mps_thread_percentage, policy, production, "
      "socket, tick_ms)");
  EXPECT_EQ(errors_of(R"({"socket": {"pth": "/x"}})"),
            "socket.pth: unknown field (expected one of: group, mode, path)");
}

TEST(Config, EveryProblemIsReportedNotOnlyTheFirst) {
  ConfigResult r = parse_config(R"({"tick_ms": 1, "max_clients": 0, "log_level": 3})");
  EXPECT_FALSE(r.config);
  EXPECT_EQ(r.errors.size(), 3u) << r.error_text();
}

TEST(Config, SyntaxErrorsAndNonObjects) {
  EXPECT_NE(errors_of("{\"tick_ms\": ").find("(document): not valid JSON"), std::string::npos);
  EXPECT_EQ(errors_of("[1]"), "(document): expected an object, got [1]");
  EXPECT_EQ(load_config("/nonexistent/gpushared.json").error_text(),
            "/nonexistent/gpushared.json: cannot be read: No such file or directory");
}

Peer peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  Peer p;
  p.pid = 100;
  p.uid = uid;
  p.gid = gid;
  p.groups = std::move(groups);
  return p;
}

TEST(Authorization, ProductionRulesMatchUidGidSupplementaryGroupAndJobPattern) {
  Config c =
      *parse_config(R"({"production": [{"uid": 1000, "job": "serve-*"}, {"gid": 77}]})").config;
  EXPECT_TRUE(production_rule_for(c, peer(1000, 1000), "serve-a"));
  EXPECT_FALSE(production_rule_for(c, peer(1000, 1000), "train"));
  EXPECT_FALSE(production_rule_for(c, peer(1001, 1001), "serve-a"));
  EXPECT_TRUE(production_rule_for(c, peer(1001, 1001, {5, 77}), "anything"));
  EXPECT_FALSE(production_rule_for(Config{}, peer(0, 0), "root-needs-a-rule-too"));
}

TEST(Authorization, OthersMayOnlyLowerTheirOwnJobs) {
  Config c = *parse_config(R"({"admin_group": 50})").config;
  using protocol::JobClass;
  const auto P = JobClass::production, O = JobClass::opportunistic;
  EXPECT_TRUE(may_set_priority(c, peer(1000, 1000), 1000, P, O).allowed);
  EXPECT_FALSE(may_set_priority(c, peer(1000, 1000), 1000, O, P).allowed);
  EXPECT_FALSE(may_set_priority(c, peer(1000, 1000), 1001, P, O).allowed);
  EXPECT_TRUE(may_set_priority(c, peer(0, 0), 1001, O, P).allowed);
  EXPECT_TRUE(may_set_priority(c, peer(1002, 1002, {50}), 1001, O, P).allowed);
  EXPECT_FALSE(may_administer(c, peer(1000, 1000)).allowed);
  EXPECT_TRUE(may_administer(c, peer(1000, 50)).allowed);
}

}  // namespace
}  // namespace gpushare::daemon

namespace gpushare::daemon {
namespace {

// deploy/gpushared.json is what operators start from: it must stay valid. Its admin group is
// created by deploy/gpushare.sysusers at install time; "root" stands in for it here.
TEST(Config, TheInstalledExampleIsValid) {
  std::ifstream in(std::string(DEPLOY_DIR) + "/gpushared.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string example = std::regex_replace(text.str(), std::regex("\"gpushare\""), "\"root\"");
  ConfigResult r = parse_config(example);
  ASSERT_TRUE(r.config) << r.error_text();
  EXPECT_EQ(r.config->socket_path, kDefaultSocketPath);
  EXPECT_FALSE(r.config->production_rules.empty());
  // The documented default (docs/policies.md, "Which to run"): harvest.
  EXPECT_EQ(r.config->default_policy, "harvest");
}

}  // namespace
}  // namespace gpushare::daemon
