// The in-flight bound (shim/in_flight.h) against a context of the test's own: its driver is a
// fake GPU whose events complete when the test says so (or when the tracker synchronises on one),
// and it publishes into control blocks in ordinary memory. What is checked is what the tracker
// asked of the driver, in order, and the count it published: no timing.
#include "in_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_gpu.h"
#include "gate.h"

namespace gpushare::shim {
namespace {

class InFlight : public fake::OnFakeGpu {
 protected:
  void TearDown() override {
    in_flight_release(ctx);
    OnFakeGpu::TearDown();
  }

  // One launch under `bound`, as shim/families.h makes it.
  void launch(uint32_t bound, bool launched = true) {
    in_flight_before_launch(ctx, bound, kStream, false);
    in_flight_after_launch(ctx, bound, kStream, false, launched);
  }
  uint32_t published() { return control_block(ctx)->in_flight.load(); }
  uint32_t tracked() { return control_block(ctx)->in_flight_tracked.load(); }
};

// Under a bound of 4, an event every 2 launches; nothing waits while fewer than 4 are unfinished.
TEST_F(InFlight, UnderTheBoundNothingWaits) {
  for (int i = 0; i < 4; ++i) launch(4);
  EXPECT_EQ(gpu.calls_so_far(), (Calls{"create 1", "record 1", "create 2", "record 2"}));
  EXPECT_EQ(published(), 4u);
  EXPECT_EQ(tracked(), 1u);
}

TEST_F(InFlight, TheLaunchAtTheBoundWaitsForTheOldestEventOnly) {
  for (int i = 0; i < 4; ++i) launch(4);
  in_flight_before_launch(ctx, 4, kStream, false);
  // Event 1 covers launches 1-2: waiting for it brings the count to 2, under the bound.
  EXPECT_EQ(gpu.calls_so_far().back(), "sync 1");
  EXPECT_EQ(published(), 2u);
  in_flight_after_launch(ctx, 4, kStream, false, true);
  EXPECT_EQ(published(), 3u);
  EXPECT_EQ(gpu.calls_so_far().size(), 5u);  // no second wait
}

TEST_F(InFlight, WhatTheGpuFinishedIsCountedWithoutWaitingAndItsEventsReused) {
  for (int i = 0; i < 4; ++i) launch(4);
  gpu.finish_all();
  launch(4);
  EXPECT_EQ(published(), 1u);
  launch(4);  // the next event: a spare one, not a new one
  EXPECT_EQ(gpu.calls_so_far(),
            (Calls{"create 1", "record 1", "create 2", "record 2", "record 2"}));
}

// The daemon lowered the bound below what the launches since the last event add up to: the
// tracker records an event now and waits for it.
TEST_F(InFlight, WhenNoEventCoversTheBacklogOneIsRecordedAndAwaited) {
  for (int i = 0; i < 3; ++i) launch(8);  // an event every 4: none yet
  EXPECT_TRUE(gpu.calls_so_far().empty());
  in_flight_before_launch(ctx, 2, kStream, false);
  EXPECT_EQ(gpu.calls_so_far(), (Calls{"create 1", "record 1", "sync 1"}));
  EXPECT_EQ(published(), 0u);
}

TEST_F(InFlight, TheCountStaysUnderTheBoundWhateverTheGpuFinishes) {
  for (uint32_t bound : {1u, 2u, 3u, 5u, 8u}) {
    SCOPED_TRACE(bound);
    for (int i = 1; i <= 60; ++i) {
      if (i % 7 == 0) gpu.finish_all();
      in_flight_before_launch(ctx, bound, kStream, false);
      EXPECT_LT(published(), bound);
      in_flight_after_launch(ctx, bound, kStream, false, true);
      EXPECT_LE(published(), bound);
    }
    in_flight_release(ctx);
  }
}

TEST_F(InFlight, AFailedLaunchIsNotCounted) {
  for (int i = 0; i < 3; ++i) launch(4, /*launched=*/false);
  EXPECT_EQ(published(), 0u);
  EXPECT_TRUE(gpu.calls_so_far().empty());
}

TEST_F(InFlight, ALaunchOverTheBoundProceedsOnlyOnceTheGpuFinishesTheOldestEvent) {
  for (int i = 0; i < 4; ++i) launch(4);
  gpu.sync_waits = true;
  std::atomic<bool> passed{false};
  std::thread fifth([&] {
    in_flight_before_launch(ctx, 4, kStream, false);
    passed.store(true);
  });
  while (gpu.calls_so_far().back() != "sync 1")
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_FALSE(passed.load());
  gpu.finish(1);
  fifth.join();
  EXPECT_TRUE(passed.load());
  EXPECT_EQ(published(), 2u);
}

TEST_F(InFlight, AFailedEventCallTurnsTheBoundOffForTheProcess) {
  gpu.create_result = CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < 20; ++i) launch(2);  // no wait, though nothing is known to finish
  EXPECT_TRUE(gpu.calls_so_far().empty());
  EXPECT_EQ(tracked(), 0u);
}

TEST_F(InFlight, ALaunchIntoACapturingStreamIsLeftAlone) {
  gpu.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  for (int i = 0; i < 10; ++i) launch(2);
  EXPECT_TRUE(gpu.calls_so_far().empty());
  EXPECT_EQ(tracked(), 0u);
}

// Events belong to a CUDA context: a launch in another one finishes with the old events first.
TEST_F(InFlight, ANewCudaContextFinishesWithTheOldContextsEvents) {
  for (int i = 0; i < 5; ++i) launch(4);  // the fifth waited for event 1
  gpu.context = 2;
  launch(4);  // records: first waits for event 2, drops both old events, then a new one
  Calls calls = gpu.calls_so_far();
  EXPECT_EQ(Calls(calls.end() - 5, calls.end()),
            (Calls{"sync 2", "destroy 1", "destroy 2", "create 3", "record 3"}));
}

TEST_F(InFlight, TheCountGoesToTheControlBlockInForce) {
  protocol::ControlBlock daemon{};
  set_control_block(ctx, &daemon);
  launch(4);
  EXPECT_EQ(daemon.in_flight.load(), 1u);
  EXPECT_EQ(daemon.in_flight_tracked.load(), 1u);
  EXPECT_EQ(ctx.local_block.in_flight_tracked.load(), 0u);
}

}  // namespace
}  // namespace gpushare::shim
