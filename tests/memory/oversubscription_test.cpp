// Issue 6: production memory always wins. An opportunistic job holds 0.8 C of managed memory; a
// production job asks for 0.6 C: the production allocation succeeds, the opportunistic job is
// paused and its memory moved to host, and it resumes, its memory back on the device and
// bit-identical, when production frees.
#include <gtest/gtest.h>
#include <signal.h>

#include "fake_device_view.h"
#include "memory_test_support.h"

namespace gpushare::testing {
namespace {

using protocol::kPausedForMemory;

struct Oversubscription : ::testing::Test {
  TempDir dir;
  Daemon daemon{dir, memory_config()};
  void SetUp() override { ASSERT_TRUE(daemon.start()); }
  fake::DeviceView device() const { return fake::DeviceView(dir / "fake-device"); }
};

// "block <paused> <residency>" -> is it paused for memory, with its memory on host?
bool swapped_out(ChildProcess& client) {
  std::string b = client.ask("block");
  unsigned paused = 0, residency = 0;
  return std::sscanf(b.c_str(), "block %u %u", &paused, &residency) == 2 &&
         (paused & kPausedForMemory) && residency == 1;
}

TEST_F(Oversubscription, ProductionTakesTheRoomAndOpportunisticResumesBitIdentical) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());

  auto p = ok_number(opp.ask("alloc " + std::to_string(held)));
  ASSERT_TRUE(p);
  ASSERT_EQ(opp.ask("fill " + std::to_string(*p) + " " + std::to_string(held) + " 7"), "ok");
  std::string checksum = opp.ask("checksum " + std::to_string(*p) + " " + std::to_string(held));
  ASSERT_EQ(checksum.rfind("ok ", 0), 0u) << checksum;
  ASSERT_EQ(opp.ask("launch 2 0"), "ok");
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "managed memory, on the device";
  EXPECT_EQ(memory_state(daemon.socket, opp.pid()).value("swappable_bytes", 0u), held);

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
    ASSERT_TRUE(q) << "production must get its memory";
    EXPECT_TRUE(swapped_out(opp));
    EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), 0u) << "its memory left the device";
    EXPECT_EQ(memory_state(daemon.socket, opp.pid()).value("state", ""), "swapped-out");

    // Paused at a launch boundary: a launch waits...
    ASSERT_TRUE(opp.send_line("launch 1 0"));
    EXPECT_FALSE(opp.read_line(300ms)) << "an opportunistic launch ran while swapped out";
    // ...until production frees; then its memory comes back first and the launch goes through.
    ASSERT_EQ(prod.ask("free " + std::to_string(*q)), "ok");
    auto resumed = opp.read_line(10s);
    ASSERT_TRUE(resumed);
    EXPECT_EQ(*resumed, "ok");
    EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "back on the device";
    EXPECT_EQ(opp.ask("checksum " + std::to_string(*p) + " " + std::to_string(held)), checksum)
        << "contents changed in a swap round trip";
  }
  auto state = memory_state(daemon.socket, opp.pid());
  EXPECT_EQ(state.value("state", ""), "resident");
  EXPECT_EQ(state.value("swaps_out", 0), 2);
  EXPECT_EQ(state.value("swaps_in", 0), 2);
  EXPECT_TRUE(daemon.log_contains("swapped-out")) << daemon.log();
}

// A client killed while the daemon waits for it to move its memory leaks nothing: the waiting
// production allocation goes through and the books hold only what is alive.
TEST_F(Oversubscription, ClientKilledMidSwapLeaksNoAccounting) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(held))));

  opp.signal(SIGSTOP);  // it cannot answer the swap request: the swap stays in flight
  ASSERT_TRUE(prod.send_line("alloc " + std::to_string(asked)));
  EXPECT_FALSE(prod.read_line(300ms)) << "production did not wait for the swap-out";
  EXPECT_EQ(memory_state(daemon.socket, opp.pid()).value("state", ""), "swapping-out");
  pid_t opp_pid = opp.pid();
  opp.signal(SIGKILL);
  opp.wait();

  auto answer = prod.read_line(10s);
  ASSERT_TRUE(answer);
  EXPECT_TRUE(ok_number(*answer)) << *answer;
  EXPECT_TRUE(eventually([&] { return !job_with_pid(daemon.socket, opp_pid); }, 5s));
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  uint64_t on_device = 0;
  for (const auto& d : status.json["devices"]) on_device += d.value("memory_bytes", uint64_t{0});
  EXPECT_EQ(on_device, asked) << "only production's memory is left in the books";
  auto free_bytes = ok_number(prod.ask("meminfo"));
  ASSERT_TRUE(free_bytes);
  EXPECT_EQ(*free_bytes, kCapacity - asked);
}

}  // namespace
}  // namespace gpushare::testing
