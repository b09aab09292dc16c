// The launch gate (shim/gate.h) against a context of the test's own, its control blocks in
// ordinary memory: the test plays the daemon, writing allowance and pause bits and waking the
// gate's futex word as it does.
//
// Orderings, not times: a launch is known to sleep at the gate once the block counts its wait
// (gate_waits), it cannot pass while the gate stays closed, and it must pass once the test opens
// the gate. A closed gate is only ever released by the test, so no assertion depends on how fast
// this machine schedules the launching thread.
#include "gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "gpushare/protocol/futex.h"

namespace gpushare::shim {
namespace {

using protocol::ControlBlock;

const DriverCalls& no_driver() {
  static const DriverCalls none{};
  return none;
}

// Waits (without bound but the test's own timeout) until `condition` holds.
template <class Condition>
void wait_until(Condition condition) {
  while (!condition()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// What the daemon does after every change of a gate: bump the futex word and wake its sleepers.
void wake_gate(ControlBlock& block) {
  block.gate_seq.fetch_add(1, std::memory_order_acq_rel);
  protocol::futex_wake_all(&block.gate_seq);
}

// A launch on a thread of its own; `passed` once pass_gate returned.
struct Launch {
  explicit Launch(ShimContext& ctx, uint64_t kernels = 1)
      : thread([this, &ctx, kernels] {
          pass = pass_gate(ctx, kernels);
          passed.store(true);
        }) {}
  ~Launch() {
    if (thread.joinable()) thread.join();
  }
  GatePass finish() {
    thread.join();
    return pass;
  }
  std::atomic<bool> passed{false};
  GatePass pass{};
  std::thread thread;
};

class Gate : public ::testing::Test {
 protected:
  // The daemon's block, put in force as registration does, with its gate as a test sets it.
  void register_with(uint64_t allowance, uint32_t paused = 0) {
    daemon.allowance.store(allowance);
    daemon.paused.store(paused);
    set_control_block(ctx, &daemon);
  }

  ShimContext ctx{&no_driver};
  ControlBlock daemon{};
};

TEST_F(Gate, BeforeRegistrationTheLocalBlockIsInForceAndOpen) {
  EXPECT_EQ(control_block(ctx), &ctx.local_block);
  for (int i = 1; i <= 3; ++i) {
    GatePass pass = pass_gate(ctx, 1);
    EXPECT_EQ(pass.block, &ctx.local_block);
    EXPECT_EQ(pass.ticket, static_cast<uint64_t>(i));
  }
  EXPECT_EQ(ctx.local_block.gate_waits.load(), 0u);
}

TEST_F(Gate, PassesWithoutWaitingWhileTheAllowanceCoversTheTicket) {
  register_with(5);
  GatePass pass{};
  for (int i = 0; i < 5; ++i) pass = pass_gate(ctx, 1);
  EXPECT_EQ(pass.block, &daemon);
  EXPECT_EQ(pass.ticket, 5u);  // the launch numbered 5 may proceed under allowance 5
  EXPECT_EQ(daemon.launches.load(), 5u);
  EXPECT_EQ(daemon.gate_waits.load(), 0u);
  EXPECT_EQ(ctx.local_block.launches.load(), 0u);
}

TEST_F(Gate, AMultiDeviceLaunchTakesOneTicketPerDevice) {
  register_with(4);
  EXPECT_EQ(pass_gate(ctx, 3).ticket, 3u);
  EXPECT_EQ(daemon.gate_waits.load(), 0u);
  Launch over(ctx, 2);  // tickets 4 and 5: 5 is over the allowance
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  EXPECT_FALSE(over.passed.load());
  daemon.allowance.store(5);
  wake_gate(daemon);
  EXPECT_EQ(over.finish().ticket, 5u);
}

TEST_F(Gate, WaitsOverTheAllowanceUntilTheDaemonRaisesIt) {
  register_with(2);
  pass_gate(ctx, 1);
  pass_gate(ctx, 1);
  Launch third(ctx);
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  EXPECT_FALSE(third.passed.load());

  // A raise that does not reach the ticket leaves it waiting.
  daemon.allowance.store(2);
  wake_gate(daemon);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(third.passed.load());

  daemon.allowance.store(3);
  wake_gate(daemon);
  GatePass pass = third.finish();
  EXPECT_EQ(pass.block, &daemon);
  EXPECT_EQ(pass.ticket, 3u);
  EXPECT_EQ(daemon.gate_waits.load(), 1u);
  EXPECT_GT(daemon.gated_ns.load(), 0u);
}

TEST_F(Gate, WaitsWhilePausedWhateverTheAllowance) {
  register_with(protocol::kUnlimited, 1);
  Launch launch(ctx);
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  EXPECT_FALSE(launch.passed.load());
  daemon.paused.store(0);
  wake_gate(daemon);
  EXPECT_EQ(launch.finish().ticket, 1u);
}

// A driver whose only capturing stream is kCapturing.
const CUstream kCapturing = reinterpret_cast<CUstream>(uintptr_t{0xc0});
const CUstream kPlain = reinterpret_cast<CUstream>(uintptr_t{0xd0});
CUresult only_one_captures(CUstream stream, CUstreamCaptureStatus* status) {
  *status = stream == kCapturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
const DriverCalls& capturing_driver() {
  static const DriverCalls driver = [] {
    DriverCalls d{};
    d.stream_is_capturing = only_one_captures;
    return d;
  }();
  return driver;
}

// A launch into a capturing stream runs nothing: holding it would hold the program's capture,
// which a paused job's memory move waits for (stream_capture.h). Other launches still wait.
TEST(GateCapture, ALaunchIntoACapturingStreamPassesAPausedGate) {
  ShimContext ctx{&capturing_driver};
  ControlBlock daemon{};
  daemon.allowance.store(0);
  daemon.paused.store(1);
  set_control_block(ctx, &daemon);
  auto captured = std::async(std::launch::async, [&] {
    return pass_gate(ctx, 1, {kCapturing, false});
  });
  ASSERT_EQ(captured.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a launch into a capturing stream was held";
  EXPECT_EQ(captured.get().ticket, 1u);
  EXPECT_EQ(daemon.gate_waits.load(), 0u);

  std::atomic<bool> passed{false};
  std::thread plain([&] {
    pass_gate(ctx, 1, {kPlain, false});
    passed = true;
  });
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  EXPECT_FALSE(passed.load());
  daemon.paused.store(0);
  daemon.allowance.store(protocol::kUnlimited);
  wake_gate(daemon);
  plain.join();
  EXPECT_TRUE(passed.load());
}

TEST_F(Gate, EveryWaitingLaunchWakesWhenTheAllowanceCoversThemAll) {
  register_with(0);
  std::vector<std::unique_ptr<Launch>> launches;
  for (int i = 0; i < 4; ++i) launches.push_back(std::make_unique<Launch>(ctx));
  wait_until([&] { return daemon.gate_waits.load() == 4; });
  for (auto& l : launches) EXPECT_FALSE(l->passed.load());
  daemon.allowance.store(4);
  wake_gate(daemon);
  std::vector<uint64_t> tickets;
  for (auto& l : launches) tickets.push_back(l->finish().ticket);
  std::sort(tickets.begin(), tickets.end());
  EXPECT_EQ(tickets, (std::vector<uint64_t>{1, 2, 3, 4}));
}

// A daemon that dies between its store and its wake: the gate re-reads the block on its own (the
// futex wait has a timeout), so the launch is late, never stuck.
TEST_F(Gate, AnOpeningWithoutAWakeIsSeenAllTheSame) {
  register_with(0);
  Launch launch(ctx);
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  daemon.allowance.store(1);  // and no wake_gate
  EXPECT_EQ(launch.finish().ticket, 1u);
}

// The daemon is gone: the link falls back to the local block, which opens the old gate and wakes
// its sleepers; later launches count into the local block.
TEST_F(Gate, FallingBackToTheLocalBlockReleasesEveryWaiter) {
  register_with(0, 1);
  Launch launch(ctx);
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  EXPECT_FALSE(launch.passed.load());
  fall_back_to_local(ctx);
  EXPECT_EQ(launch.finish().block, &daemon);
  EXPECT_EQ(control_block(ctx), &ctx.local_block);
  EXPECT_EQ(daemon.allowance.load(), protocol::kUnlimited);
  EXPECT_EQ(daemon.paused.load(), 0u);
  EXPECT_EQ(pass_gate(ctx, 1).block, &ctx.local_block);
}

// A launch asleep at a block that is no longer in force never keeps the program waiting, even
// when that block's gate stays closed (nobody opened it).
TEST_F(Gate, ABlockNoLongerInForceHoldsNoLaunch) {
  register_with(0, 1);
  Launch launch(ctx);
  wait_until([&] { return daemon.gate_waits.load() == 1; });
  ControlBlock replacement{};
  set_control_block(ctx, &replacement);
  GatePass pass = launch.finish();
  EXPECT_EQ(pass.block, &daemon);  // it counted where it started
  EXPECT_EQ(daemon.paused.load(), 1u);
  EXPECT_EQ(pass_gate(ctx, 1).block, &replacement);
}

TEST_F(Gate, PuttingNoBlockInForceMeansTheLocalOne) {
  register_with(protocol::kUnlimited);
  set_control_block(ctx, nullptr);
  EXPECT_EQ(control_block(ctx), &ctx.local_block);
}

}  // namespace
}  // namespace gpushare::shim
