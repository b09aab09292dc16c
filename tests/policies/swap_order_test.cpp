// The swap-in order of memory oversubscription (policies/swap_order.h), with the thesis's example.
#include "gpushare/policies/swap_order.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpushare::policies {
namespace {

TEST(SwapOrder, WeightIsRewardOverPenalty) {
  EXPECT_DOUBLE_EQ(swap_weight({1, 0.5, 2.0}), 0.25);
  EXPECT_TRUE(std::isinf(swap_weight({1, 0.1, 0.0}))) << "nothing to move: bring it back first";
  EXPECT_DOUBLE_EQ(swap_weight({1, 3.0, 1.0}), 1.0) << "a reward is a share, clamped to 1";
}

// The thesis's example: weights D > C > A > B give the order D, B, C, A (highest, lowest, next
// highest, next lowest), so each long transfer hides under a long compute.
TEST(SwapOrder, AlternatesHighestAndLowestWeight) {
  std::vector<SwapCandidate> jobs = {
      {1, 0.6, 2.0},  // A: 0.3
      {2, 0.2, 2.0},  // B: 0.1
      {3, 0.8, 2.0},  // C: 0.4
      {4, 0.9, 1.0},  // D: 0.9
  };
  EXPECT_EQ(swap_in_order(jobs), (std::vector<uint64_t>{4, 2, 3, 1}));
}

TEST(SwapOrder, EqualWeightsPreferTheShorterTransfer) {
  std::vector<SwapCandidate> jobs = {{7, 0.4, 2.0}, {8, 0.2, 1.0}, {9, 0.8, 4.0}};
  // All weigh 0.2: by penalty 8 (1 s), 7 (2 s), 9 (4 s); alternating gives 8, 9, 7.
  EXPECT_EQ(swap_in_order(jobs), (std::vector<uint64_t>{8, 9, 7}));
}

TEST(SwapOrder, EdgeCases) {
  EXPECT_TRUE(swap_in_order({}).empty());
  EXPECT_EQ(swap_in_order({{5, 0.5, 1.0}}), (std::vector<uint64_t>{5}));
  // An idle job (reward 0) goes last even with a short transfer; one with nothing to move first.
  EXPECT_EQ(swap_in_order({{1, 0.0, 0.1}, {2, 0.5, 1.0}, {3, 0.0, 0.0}}),
            (std::vector<uint64_t>{3, 1, 2}));
}

}  // namespace
}  // namespace gpushare::policies
