// Selecting policies by name, checking their parameters, and the gate -> control block conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "gpushare/policies/policy.h"

namespace gpushare::policies {
namespace {

TEST(Registry, KnowsTheFivePolicies) {
  for (std::string_view name : {"harvest", "tgs", "priority", "fair", "none"}) {
    auto made = make_policy(name);
    ASSERT_TRUE(made.policy) << made.error;
    EXPECT_EQ(made.policy->name(), name);
    EXPECT_TRUE(made.error.empty());
  }
  EXPECT_EQ(policy_names().size(), 5u);
}

TEST(Registry, RefusesAnUnknownNameAndNamesIt) {
  auto made = make_policy("fastest");
  EXPECT_FALSE(made.policy);
  EXPECT_NE(made.error.find("'fastest'"), std::string::npos) << made.error;
  EXPECT_NE(made.error.find("tgs"), std::string::npos) << "lists the known ones: " << made.error;
}

TEST(Registry, RefusesAnUnknownParameterAndNamesIt) {
  auto made = make_policy("tgs", {{"targt", 0.9}});
  EXPECT_FALSE(made.policy);
  EXPECT_NE(made.error.find("'targt'"), std::string::npos) << made.error;
  EXPECT_NE(made.error.find("'tgs'"), std::string::npos) << made.error;
  EXPECT_NE(made.error.find("target"), std::string::npos) << "lists the real ones: " << made.error;

  auto none = make_policy("none", {{"target", 0.9}});
  EXPECT_FALSE(none.policy);
  EXPECT_NE(none.error.find("'target'"), std::string::npos) << none.error;
}

TEST(Registry, RefusesOutOfRangeParametersAndNamesThem) {
  for (const auto& [policy, name, value] : {std::tuple{"tgs", "target", 1.5},
                                            {"tgs", "target", 0.0},
                                            {"tgs", "control_period_ms", -1.0},
                                            {"priority", "in_flight", 0.0},
                                            {"fair", "headroom", 7.0}}) {
    auto made = make_policy(policy, {{name, value}});
    EXPECT_FALSE(made.policy) << policy << " " << name << "=" << value;
    EXPECT_NE(made.error.find("'" + std::string(name) + "'"), std::string::npos) << made.error;
    EXPECT_NE(made.error.find("out of range"), std::string::npos) << made.error;
  }
  EXPECT_FALSE(make_policy("tgs", {{"target", std::nan("")}}).policy);
}

TEST(Registry, RefusesFractionsOfCounts) {
  auto made = make_policy("priority", {{"in_flight", 2.5}});
  EXPECT_FALSE(made.policy);
  EXPECT_NE(made.error.find("'in_flight'"), std::string::npos) << made.error;
  EXPECT_NE(made.error.find("whole number"), std::string::npos) << made.error;
}

TEST(Registry, AcceptsParametersInRange) {
  auto made = make_policy("tgs", {{"target", 0.9}, {"control_period_ms", 100}});
  EXPECT_TRUE(made.policy) << made.error;
}

TEST(Registry, DescribesParametersWithDefaultsInRange) {
  EXPECT_TRUE(parameter_specs("none").empty());
  EXPECT_TRUE(parameter_specs("no-such").empty());
  for (std::string_view name : policy_names())
    for (const ParameterSpec& spec : parameter_specs(name)) {
      EXPECT_LE(spec.min, spec.default_value) << name << "." << spec.name;
      EXPECT_LE(spec.default_value, spec.max) << name << "." << spec.name;
      EXPECT_FALSE(spec.meaning.empty()) << name << "." << spec.name;
    }
  bool has_target = false;
  for (const ParameterSpec& spec : parameter_specs("tgs"))
    if (spec.name == "target") has_target = spec.default_value == 0.95;
  EXPECT_TRUE(has_target) << "tgs holds production at 0.95 of solo unless told otherwise";
}

TEST(ParseParameters, ReadsPairsSeparatedByCommasOrSpaces) {
  Parameters parameters;
  EXPECT_EQ(parse_parameters("target=0.9, control_period_ms=100 in_flight=4", parameters), "");
  EXPECT_EQ(parameters.size(), 3u);
  EXPECT_DOUBLE_EQ(parameters["target"], 0.9);
  EXPECT_DOUBLE_EQ(parameters["control_period_ms"], 100);
  EXPECT_DOUBLE_EQ(parameters["in_flight"], 4);
  Parameters empty;
  EXPECT_EQ(parse_parameters("", empty), "");
  EXPECT_TRUE(empty.empty());
}

TEST(ParseParameters, RefusesWhatIsNotNameEqualsNumber) {
  Parameters parameters;
  std::string error = parse_parameters("target=high", parameters);
  EXPECT_NE(error.find("'target'"), std::string::npos) << error;
  EXPECT_NE(error.find("'high'"), std::string::npos) << error;
  EXPECT_NE(parse_parameters("target", parameters).find("'target'"), std::string::npos);
  EXPECT_FALSE(parse_parameters("=3", parameters).empty());
  EXPECT_FALSE(parse_parameters("target=0.9x", parameters).empty());
  EXPECT_FALSE(parse_parameters("target=", parameters).empty());
}

TEST(Allowance, AddsTheWindowsLaunchesToTheCount) {
  EXPECT_EQ(allowance_for(1000, 25), 1025u);
  EXPECT_EQ(allowance_for(0, 0), 0u);
  EXPECT_EQ(allowance_for(1000, kUnlimited), kUnlimited);
}

TEST(Allowance, SaturatesBelowUnlimitedInsteadOfWrapping) {
  EXPECT_EQ(allowance_for(kUnlimited - 10, 100), kUnlimited - 1);
  EXPECT_EQ(allowance_for(kUnlimited - 1, 1), kUnlimited - 1);
}

TEST(Allowance, ZeroLaunchesPausesTheJob) {
  // An allowance equal to the count would still release a launch already counted and waiting.
  const ControlValues held = control_values(Gate{.job_id = 1, .launches = 0}, 500);
  EXPECT_TRUE(held.paused);
  const ControlValues open = control_values(Gate{.job_id = 1, .launches = 7}, 500);
  EXPECT_FALSE(open.paused);
  EXPECT_EQ(open.allowance, 507u);
  const ControlValues paused = control_values(Gate{.job_id = 1, .paused = true}, 500);
  EXPECT_TRUE(paused.paused);
  EXPECT_EQ(paused.allowance, kUnlimited);
}

TEST(Idle, NoLaunchesAndNothingInFlight) {
  EXPECT_TRUE(is_idle({.job_id = 1, .launches = 0}));
  EXPECT_TRUE(is_idle({.job_id = 1, .launches = 0, .in_flight = 0}));
  EXPECT_FALSE(is_idle({.job_id = 1, .launches = 0, .in_flight = 2}));
  EXPECT_FALSE(is_idle({.job_id = 1, .launches = 1}));
}

TEST(None, LeavesEveryJobUnlimited) {
  auto policy = make_policy("none").policy;
  DeviceObservation device{.now_ns = 1, .window_ns = 50'000'000};
  device.jobs = {{.job_id = 7, .job_class = JobClass::production, .launches = 100},
                 {.job_id = 9, .job_class = JobClass::opportunistic, .launches = 900}};
  const auto gates = policy->decide(device);
  ASSERT_EQ(gates.size(), 2u);
  EXPECT_EQ(gates[0].job_id, 7u);
  EXPECT_EQ(gates[1].job_id, 9u);
  for (const Gate& gate : gates) {
    EXPECT_EQ(gate.launches, kUnlimited);
    EXPECT_FALSE(gate.paused);
    EXPECT_EQ(gate.max_in_flight, 0u);
  }
}

TEST(Policies, AnswerEveryJobInOrderEvenWithAZeroWindow) {
  for (std::string_view name : policy_names()) {
    auto policy = make_policy(name).policy;
    DeviceObservation device{.now_ns = 0, .window_ns = 0};
    device.jobs = {{.job_id = 3, .job_class = JobClass::opportunistic, .launches = 5},
                   {.job_id = 1, .job_class = JobClass::production, .launches = 5},
                   {.job_id = 2, .job_class = JobClass::opportunistic, .launches = 5}};
    const auto gates = policy->decide(device);
    ASSERT_EQ(gates.size(), 3u) << name;
    EXPECT_EQ(gates[0].job_id, 3u) << name;
    EXPECT_EQ(gates[1].job_id, 1u) << name;
    EXPECT_EQ(gates[2].job_id, 2u) << name;
    EXPECT_TRUE(policy->decide(DeviceObservation{}).empty()) << name;
  }
}

// A parameter whose value needs a gate the caller cannot carry out is refused by name; its default,
// and any value where the caller has the gate (the simulator), are accepted.
TEST(Registry, AValueNeedingAGateTheCallerLacksIsRefused) {
  const Capabilities without{.kernel_idle_gating = false};
  MakePolicyResult refused = make_policy("priority", {{"kernel_gating", 1}}, without);
  EXPECT_FALSE(refused.policy);
  EXPECT_EQ(refused.error.rfind("kernel_gating=1 needs kernel-level idle gating", 0), 0u)
      << refused.error;
  EXPECT_NE(refused.error.find("leave kernel_gating at 0"), std::string::npos) << refused.error;
  EXPECT_TRUE(make_policy("priority", {{"kernel_gating", 0}}, without).policy);
  EXPECT_TRUE(make_policy("priority", {}, without).policy);
  EXPECT_TRUE(make_policy("priority", {{"kernel_gating", 1}}).policy);
  for (std::string_view name : policy_names())  // nothing else depends on the gate
    EXPECT_TRUE(make_policy(name, {}, without).policy) << name;
}

}  // namespace
}  // namespace gpushare::policies
