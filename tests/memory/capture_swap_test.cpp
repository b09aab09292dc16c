// Memory moves beside CUDA graph captures (shim/stream_capture.h). A move synchronises the
// opportunistic job's context, which invalidates every capture in progress on its device (the fake
// driver does as the real one does): the shim's swap thread waits for the program's capture to end
// before it moves, within the patience the daemon gives (half of memory.swap_timeout_ms), and a
// launch into the capturing stream passes the gate the daemon closed for the move, so that the
// capture can end at all.
#include <gtest/gtest.h>

#include <optional>

#include "fake_device_view.h"
#include "memory_test_support.h"

namespace gpushare::testing {
namespace {

using protocol::kPausedForMemory;

nlohmann::json config_with_swap_timeout(int ms) {
  nlohmann::json config = memory_config();
  config["memory"]["swap_timeout_ms"] = ms;
  return config;
}

bool paused_for_memory(ChildProcess& client) {
  unsigned paused = 0, residency = 0;
  return std::sscanf(client.ask("block").c_str(), "block %u %u", &paused, &residency) == 2 &&
         (paused & kPausedForMemory);
}

struct CaptureBesideSwap : ::testing::Test {
  TempDir dir;
  std::optional<Daemon> daemon;
  ChildProcess opp, prod;
  fake::DeviceView device() const { return fake::DeviceView(dir / "fake-device"); }
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;

  // A daemon with that swap timeout, and the two jobs, the opportunistic one holding `held`.
  void start(int swap_timeout_ms) {
    daemon.emplace(dir, config_with_swap_timeout(swap_timeout_ms));
    ASSERT_TRUE(daemon->start());
    opp = start_client(dir, daemon->socket, "opp", "opportunistic");
    prod = start_client(dir, daemon->socket, "prod", "production");
    ASSERT_TRUE(opp.running() && prod.running());
    ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(held))));
    ASSERT_EQ(opp.ask("launch 2 0"), "ok");
  }
};

// The swap-out waits for the capture in progress, which goes on and ends intact (its launches pass
// the paused gate); then the memory moves, production gets its room, and the captured graph's
// launch waits, as any launch of a swapped-out job does, until production frees.
TEST_F(CaptureBesideSwap, TheMoveWaitsForTheCaptureWhichEndsIntact) {
  ASSERT_NO_FATAL_FAILURE(start(8000));  // a patience of 4 s: ample for the steps

  ASSERT_EQ(opp.ask("capture-begin global"), "ok");
  ASSERT_TRUE(prod.send_line("alloc " + std::to_string(asked)));
  ASSERT_TRUE(eventually([&] { return paused_for_memory(opp); }, 10s)) << daemon->log();
  EXPECT_EQ(opp.ask("capture-launch 2 0"), "ok") << "a captured launch was held at the gate";
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "the memory moved beside the capture";
  EXPECT_EQ(opp.ask("capture-end"), "ok 2") << "the capture was invalidated";

  auto answer = prod.read_line(20s);
  ASSERT_TRUE(answer) << daemon->log();
  auto q = ok_number(*answer);
  ASSERT_TRUE(q) << *answer;
  EXPECT_TRUE(eventually([&] { return device().bytes_of_pid(0, opp.pid()) == 0; }, 10s));

  ASSERT_TRUE(opp.send_line("graph-launch"));
  EXPECT_FALSE(opp.read_line(300ms)) << "the graph ran while its job was swapped out";
  ASSERT_EQ(prod.ask("free " + std::to_string(*q)), "ok");
  auto launched = opp.read_line(10s);
  ASSERT_TRUE(launched);
  EXPECT_EQ(*launched, "ok");
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "back on the device";
}

// A capture that outlasts the patience does not keep production waiting: the memory moves, the
// capture is invalidated (what the driver does to it), and the shim says why in one line.
TEST_F(CaptureBesideSwap, ACaptureThatOutlastsThePatienceDoesNotHoldProductionBack) {
  ASSERT_NO_FATAL_FAILURE(start(2000));  // a patience of 1 s

  ASSERT_EQ(opp.ask("capture-begin global"), "ok");
  auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
  ASSERT_TRUE(q) << "production must get its memory\n" << daemon->log();
  EXPECT_TRUE(eventually([&] { return device().bytes_of_pid(0, opp.pid()) == 0; }, 10s));
  EXPECT_FALSE(daemon->log_contains("did not move to host")) << "the move came within the timeout";
  EXPECT_EQ(opp.ask("capture-end"), "error 901") << "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
  EXPECT_NE(read_file(dir / "probe.stderr")
                .find("graph capture of this program has been in "
                      "progress for over 1000 ms"),
            std::string::npos)
      << read_file(dir / "probe.stderr");
}

// An allocation made inside a capture while the job's memory is on host (PyTorch's allocator makes
// them under capture, in relaxed mode) gets the host preference but no prefetch: a prefetch on the
// legacy stream would join the capture and invalidate it.
TEST_F(CaptureBesideSwap, AnAllocationInsideACaptureWhileOnHostLeavesTheCaptureIntact) {
  ASSERT_NO_FATAL_FAILURE(start(8000));
  auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
  ASSERT_TRUE(q) << daemon->log();
  ASSERT_TRUE(eventually([&] { return device().bytes_of_pid(0, opp.pid()) == 0; }, 10s));
  ASSERT_EQ(opp.ask("capture-begin relaxed"), "ok");
  auto p = ok_number(opp.ask("alloc " + std::to_string(kCapacity / 64), 20s));
  ASSERT_TRUE(p) << daemon->log();
  EXPECT_EQ(opp.ask("capture-launch 1 0"), "ok");
  EXPECT_EQ(opp.ask("capture-end"), "ok 1") << "the allocation's prefetch joined the capture";
}

}  // namespace
}  // namespace gpushare::testing
