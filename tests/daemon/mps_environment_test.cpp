// The shim's choice of CUDA_MPS_* variables (shim/mps_environment.h): the daemon's answer plus
// what the program set itself -> what to set, and which warnings.
#include "mps_environment.h"

#include <gtest/gtest.h>

#include <map>

namespace gpushare::shim {
namespace {

using Env = std::map<std::string, std::string>;

MpsEnvironment decide(const std::optional<MpsGrant>& grant, const Env& env = {}) {
  return decide_mps_environment(grant, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

Env as_map(const MpsEnvironment& e) {
  return Env(e.set.begin(), e.set.end());
}

const MpsGrant kOpportunistic{1, 30, "/run/gpushare/mps/pipe"};
const MpsGrant kProduction{0, 0, "/run/gpushare/mps/pipe"};

TEST(MpsEnvironment, NoDaemonOrNoMpsSetsNothing) {
  EXPECT_TRUE(decide(std::nullopt).set.empty());
  MpsEnvironment e = decide(std::nullopt, {{"CUDA_MPS_PIPE_DIRECTORY", "/mine"}});
  EXPECT_TRUE(e.set.empty());
  EXPECT_TRUE(e.warnings.empty());
}

TEST(MpsEnvironment, OpportunisticJobGetsLowPriorityAndTheThreadLimit) {
  MpsEnvironment e = decide(kOpportunistic);
  EXPECT_EQ(as_map(e), (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/run/gpushare/mps/pipe"},
                            {"CUDA_MPS_CLIENT_PRIORITY", "1"},
                            {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"}}));
  EXPECT_TRUE(e.warnings.empty());
}

TEST(MpsEnvironment, ProductionJobGetsNormalPriorityAndNoLimit) {
  MpsEnvironment e = decide(kProduction);
  EXPECT_EQ(as_map(e), (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/run/gpushare/mps/pipe"},
                            {"CUDA_MPS_CLIENT_PRIORITY", "0"}}));
}

TEST(MpsEnvironment, TheProgramsOwnEqualPipeDirectoryIsKeptQuietly) {
  MpsEnvironment e = decide(kProduction, {{"CUDA_MPS_PIPE_DIRECTORY", "/run/gpushare/mps/pipe/"}});
  EXPECT_FALSE(as_map(e).count("CUDA_MPS_PIPE_DIRECTORY"));
  EXPECT_TRUE(e.warnings.empty());
}

TEST(MpsEnvironment, AnotherPipeDirectoryIsReplacedWithAWarning) {
  MpsEnvironment e = decide(kProduction, {{"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}});
  EXPECT_EQ(as_map(e)["CUDA_MPS_PIPE_DIRECTORY"], "/run/gpushare/mps/pipe");
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_NE(e.warnings[0].find("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps is not gpushared's MPS"),
            std::string::npos);
}

TEST(MpsEnvironment, AProgramMayAskForLessNeverForMore) {
  // Lower priority than granted, fewer threads than the limit: kept, no warning.
  MpsEnvironment less = decide(kProduction, {{"CUDA_MPS_CLIENT_PRIORITY", "1"}});
  EXPECT_FALSE(as_map(less).count("CUDA_MPS_CLIENT_PRIORITY"));
  EXPECT_TRUE(less.warnings.empty());
  MpsEnvironment fewer = decide(kOpportunistic, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "20"}});
  EXPECT_FALSE(as_map(fewer).count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
  EXPECT_TRUE(fewer.warnings.empty());

  // Higher priority, more threads, nonsense: replaced, one warning each.
  MpsEnvironment more = decide(kOpportunistic, {{"CUDA_MPS_CLIENT_PRIORITY", "0"},
                                                {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"}});
  EXPECT_EQ(as_map(more)["CUDA_MPS_CLIENT_PRIORITY"], "1");
  EXPECT_EQ(as_map(more)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "30");
  EXPECT_EQ(more.warnings.size(), 2u);
  MpsEnvironment nonsense = decide(kOpportunistic, {{"CUDA_MPS_CLIENT_PRIORITY", "high"}});
  EXPECT_EQ(as_map(nonsense)["CUDA_MPS_CLIENT_PRIORITY"], "1");
  ASSERT_EQ(nonsense.warnings.size(), 1u);
  EXPECT_NE(nonsense.warnings[0].find("is not 0 or 1"), std::string::npos);
}

TEST(MpsEnvironment, WithoutALimitTheProgramsThreadPercentageStays) {
  MpsEnvironment e = decide(kProduction, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"}});
  EXPECT_FALSE(as_map(e).count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"));
  EXPECT_TRUE(e.warnings.empty());
}

}  // namespace
}  // namespace gpushare::shim
