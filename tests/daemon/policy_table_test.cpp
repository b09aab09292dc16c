// Each device's policy (daemon/policy_table.h): the file's choice, a gpusharectl choice over it
// until the next reload, and the parameters that go with each.
#include "policy_table.h"

#include <gtest/gtest.h>

namespace gpushare::daemon {
namespace {

Config file() {
  Config c;
  c.default_policy = "harvest";
  c.device_policies = {{1, "tgs"}};
  c.policy_parameters = {{"harvest", {{"target", 0.9}}}, {"tgs", {{"target", 0.97}}}};
  return c;
}

TEST(PolicyTable, TheFileDecidesEachDeviceAndItsParameters) {
  PolicyTable table;
  table.configure(file());
  EXPECT_EQ(table.policy_for(0), "harvest");
  EXPECT_EQ(table.policy_for(1), "tgs");
  EXPECT_EQ(table.policy_for(7), "harvest");
  EXPECT_EQ(table.choice_for(0).parameters.at("target"), 0.9);
  EXPECT_EQ(table.choice_for(1).parameters.at("target"), 0.97);
  EXPECT_EQ(table.devices(), (std::set<int>{1}));
}

// A choice made with gpusharectl holds its own parameters: none given means the policy's
// defaults, not the file's parameters for that policy.
TEST(PolicyTable, AChoiceOfTheCtlHoldsWithItsOwnParameters) {
  PolicyTable table;
  table.configure(file());
  table.choose(0, "harvest", {});
  EXPECT_EQ(table.policy_for(0), "harvest");
  EXPECT_TRUE(table.choice_for(0).parameters.empty());
  table.choose(2, "tgs", {{"target", 0.8}});
  EXPECT_EQ(table.policy_for(2), "tgs");
  EXPECT_EQ(table.choice_for(2).parameters.at("target"), 0.8);
  EXPECT_EQ(table.policy_for(3), "harvest");  // other devices keep the file's
  EXPECT_EQ(table.devices(), (std::set<int>{0, 1, 2}));
}

TEST(PolicyTable, AReloadLetsTheFileDecideAgain) {
  PolicyTable table;
  table.configure(file());
  table.choose(1, "none", {});
  Config changed = file();
  changed.default_policy = "tgs";
  table.configure(changed);
  EXPECT_EQ(table.policy_for(1), "tgs");
  EXPECT_EQ(table.policy_for(0), "tgs");
  EXPECT_EQ(table.choice_for(0).parameters.at("target"), 0.97);
}

}  // namespace
}  // namespace gpushare::daemon
