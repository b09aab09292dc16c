// Admission against limits, and each job's view of memory (cuMemGetInfo,
// cuDeviceTotalMem, NVML), with the real daemon, shim and ctl on the fake driver.
#include <gtest/gtest.h>

#include "memory_test_support.h"

namespace gpushare::testing {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
const std::string kOutOfMemory = "error 2";  // CUDA_ERROR_OUT_OF_MEMORY

struct Admission : ::testing::Test {
  TempDir dir;
  Daemon daemon{dir, memory_config({{"lim*", 16 * kMiB}})};
  void SetUp() override { ASSERT_TRUE(daemon.start()); }
};

// total = min(limit, capacity); free = what the job may still take: production may take what
// opportunistic jobs hold, opportunistic jobs only what is left.
TEST_F(Admission, EachJobSeesItsOwnView) {
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  ChildProcess lim = start_client(dir, daemon.socket, "lim", "opportunistic");
  ASSERT_TRUE(prod.running() && opp.running() && lim.running());
  ASSERT_TRUE(ok_number(prod.ask("alloc " + std::to_string(20 * kMiB))));
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(12 * kMiB))));
  ASSERT_TRUE(ok_number(lim.ask("alloc " + std::to_string(4 * kMiB))));

  auto view_is = [](ChildProcess& c, uint64_t free_bytes, uint64_t total) {
    return eventually(
        [&] {
          std::string answer = c.ask("meminfo");
          return ok_field(answer, 0) == free_bytes && ok_field(answer, 1) == total;
        },
        5s);
  };
  const uint64_t used = (20 + 12 + 4) * kMiB;
  EXPECT_TRUE(view_is(prod, kCapacity - 20 * kMiB, kCapacity))
      << prod.ask("meminfo") << ": production may take opportunistic managed memory";
  EXPECT_TRUE(view_is(opp, kCapacity - used, kCapacity)) << opp.ask("meminfo");
  EXPECT_TRUE(view_is(lim, 12 * kMiB, 16 * kMiB)) << lim.ask("meminfo") << ": limit 16 MiB";
  EXPECT_EQ(ok_number(lim.ask("totalmem")), 16 * kMiB);
  EXPECT_EQ(ok_number(prod.ask("totalmem")), kCapacity);
  // NVML inside the job agrees (nvidia-smi's numbers).
  std::string nvml = lim.ask("nvml");
  EXPECT_EQ(ok_field(nvml, 0), 12 * kMiB) << nvml;
  EXPECT_EQ(ok_field(nvml, 1), 16 * kMiB) << nvml;
  EXPECT_EQ(ok_field(nvml, 2), 4 * kMiB) << nvml;
}

TEST_F(Admission, OverItsLimitAJobGetsOutOfMemoryAndOthersCarryOn) {
  ChildProcess lim = start_client(dir, daemon.socket, "lim", "opportunistic");
  ChildProcess other = start_client(dir, daemon.socket, "other", "opportunistic");
  ASSERT_TRUE(lim.running() && other.running());
  auto first = ok_number(lim.ask("alloc " + std::to_string(10 * kMiB)));
  ASSERT_TRUE(first);
  EXPECT_EQ(lim.ask("alloc " + std::to_string(8 * kMiB)), kOutOfMemory);
  EXPECT_TRUE(ok_number(other.ask("alloc " + std::to_string(30 * kMiB)))) << "others carry on";
  EXPECT_TRUE(ok_number(lim.ask("alloc " + std::to_string(4 * kMiB)))) << "within its limit";
  EXPECT_EQ(run_ctl(daemon.socket, {"status"}).exit_code, 0) << "the daemon carries on";

  // gpusharectl set-limit: lifted (`none` would return it to its rule), then set by pid.
  CtlResult lifted = run_ctl(daemon.socket, {"set-limit", "lim", "unlimited"});
  ASSERT_EQ(lifted.exit_code, 0) << lifted.err;
  EXPECT_NE(lifted.out.find("limit 16.0 MiB -> none"), std::string::npos) << lifted.out;
  EXPECT_TRUE(ok_number(lim.ask("alloc " + std::to_string(8 * kMiB))));
  ASSERT_EQ(run_ctl(daemon.socket, {"set-limit", std::to_string(lim.pid()), "24M"}).exit_code, 0);
  EXPECT_EQ(lim.ask("alloc " + std::to_string(4 * kMiB)), kOutOfMemory)
      << "22 MiB held, 24 MiB limit";
  EXPECT_EQ(memory_state(daemon.socket, lim.pid()).value("limit_bytes", 0u), 24 * kMiB);
  EXPECT_EQ(run_ctl(daemon.socket, {"set-limit", "nosuchjob", "1G"}).exit_code, 1);
}

// A device allocation that cannot fit even with every opportunistic job on host is refused.
TEST_F(Admission, ProductionBeyondTheCapacityIsRefused) {
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(prod.running());
  ASSERT_TRUE(ok_number(prod.ask("alloc " + std::to_string(40 * kMiB))));
  EXPECT_EQ(prod.ask("alloc " + std::to_string(30 * kMiB)), kOutOfMemory);
  EXPECT_TRUE(ok_number(prod.ask("alloc " + std::to_string(20 * kMiB))));
}

// GPUSHARE_TRACE_ALLOC=1: `gpusharectl jobs --memory` shows which call sites hold how much.
TEST_F(Admission, AllocationSitesAreShown) {
  ChildProcess opp =
      start_client(dir, daemon.socket, "opp", "opportunistic", {{"GPUSHARE_TRACE_ALLOC", "1"}});
  ASSERT_TRUE(opp.running());
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(2 * kMiB))));
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(3 * kMiB))));
  auto sites = memory_state(daemon.socket, opp.pid()).value("sites", nlohmann::json::array());
  ASSERT_EQ(sites.size(), 1u) << sites.dump() << ": both come from one call site";
  EXPECT_EQ(sites[0].value("bytes", 0u), 5 * kMiB);
  EXPECT_EQ(sites[0].value("allocations", 0), 2);
  EXPECT_NE(sites[0].value("where", "").find("gpushare_memory_client"), std::string::npos)
      << sites.dump();
  CtlResult table = run_ctl(daemon.socket, {"jobs", "--memory"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("5.0 MiB in 2 allocations"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace gpushare::testing

namespace gpushare::testing {
namespace {

// memory.oversubscribe decides whether an opportunistic job's device allocations become swappable
// (managed) memory; without it they stay plain device memory, as without gpushare.
uint64_t swappable_after_alloc(bool oversubscribe) {
  TempDir dir;
  nlohmann::json config = memory_config();
  config["memory"]["oversubscribe"] = oversubscribe;
  Daemon daemon{dir, config};
  EXPECT_TRUE(daemon.start()) << daemon.log();
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  EXPECT_TRUE(opp.running());
  EXPECT_TRUE(ok_number(opp.ask("alloc " + std::to_string(8 * kMiB))));
  return memory_state(daemon.socket, opp.pid()).value("swappable_bytes", uint64_t{0});
}

TEST(OversubscriptionConfig, IsOptIn) {
  EXPECT_EQ(swappable_after_alloc(false), 0u);
  EXPECT_EQ(swappable_after_alloc(true), 8 * kMiB);
}

}  // namespace
}  // namespace gpushare::testing
