// The weighted max-min split of a launch budget and the carrying of fractional launches.
#include "share.h"

#include <gtest/gtest.h>

namespace gpushare::policies {
namespace {

TEST(SplitByWeight, FollowsWeightsWhenEveryoneWantsMore) {
  const std::vector<Claim> claims = {{1, kNoLimit}, {3, kNoLimit}};
  const auto shares = split_by_weight(100, claims);
  EXPECT_DOUBLE_EQ(shares[0], 25);
  EXPECT_DOUBLE_EQ(shares[1], 75);
}

TEST(SplitByWeight, GivesWhatAJobDoesNotUseToTheOthers) {
  const std::vector<Claim> claims = {{1, 10}, {1, kNoLimit}, {2, kNoLimit}};
  const auto shares = split_by_weight(100, claims);
  EXPECT_DOUBLE_EQ(shares[0], 10);
  EXPECT_DOUBLE_EQ(shares[1], 30);
  EXPECT_DOUBLE_EQ(shares[2], 60);
}

TEST(SplitByWeight, SettlesInSeveralRounds) {
  // A third each (23.3) is more than job 0 wants; then half of the rest (32.5) is more than job 1
  // wants; job 2 gets everything left.
  const std::vector<Claim> claims = {{1, 5}, {1, 30}, {1, kNoLimit}};
  const auto shares = split_by_weight(70, claims);
  EXPECT_DOUBLE_EQ(shares[0], 5);
  EXPECT_DOUBLE_EQ(shares[1], 30);
  EXPECT_DOUBLE_EQ(shares[2], 35);
}

TEST(SplitByWeight, NeverHandsOutMoreThanDemanded) {
  const std::vector<Claim> claims = {{1, 5}, {2, 5}};
  const auto shares = split_by_weight(100, claims);
  EXPECT_DOUBLE_EQ(shares[0], 5);
  EXPECT_DOUBLE_EQ(shares[1], 5);
  EXPECT_TRUE(split_by_weight(10, {}).empty());
  const auto nothing = split_by_weight(0, claims);
  EXPECT_DOUBLE_EQ(nothing[0] + nothing[1], 0);
}

TEST(WholeLaunches, CarriesFractionsSoLowRatesGetThrough) {
  double carry = 0;
  uint64_t total = 0;
  for (int window = 0; window < 10; ++window) total += whole_launches(0.25, carry);
  EXPECT_TRUE(total == 2 || total == 3) << total;  // 2.5 on average
  double fresh = 0;
  EXPECT_EQ(whole_launches(kNoLimit, fresh), kUnlimited);
  EXPECT_EQ(whole_launches(-3, fresh), 0u);
}

TEST(LaunchCost, LearnsGpuTimePerLaunchFromBusyTime) {
  LaunchCost cost;
  cost.observe({.job_id = 1, .launches = 10});  // no busy time: nothing learnt
  EXPECT_FALSE(cost.known());
  cost.observe({.job_id = 1, .launches = 0, .busy_ns = 5000});  // no launches: nothing learnt
  EXPECT_FALSE(cost.known());
  cost.observe({.job_id = 1, .launches = 10, .busy_ns = 2'000'000});
  EXPECT_DOUBLE_EQ(cost.ns_per_launch, 200'000);
}

}  // namespace
}  // namespace gpushare::policies
