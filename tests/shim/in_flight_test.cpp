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

#include "gate.h"

namespace gpushare::shim {
namespace {

// A GPU whose work the test finishes by hand. CUevent k is events[k - 1].
struct FakeGpu {
  struct Event {
    bool complete = true;  // a new event is complete until recorded
  };

  void finish(size_t event) {
    std::lock_guard lock(mutex);
    events.at(event - 1).complete = true;
    finished.notify_all();
  }
  void finish_all() {
    std::lock_guard lock(mutex);
    for (Event& e : events) e.complete = true;
    finished.notify_all();
  }
  std::vector<std::string> calls_so_far() {
    std::lock_guard lock(mutex);
    return calls;
  }

  std::mutex mutex;
  std::condition_variable finished;
  std::vector<Event> events;
  std::vector<std::string> calls;  // "create 1", "record 1", "sync 1", "destroy 1" (not queries)
  bool sync_waits = false;  // cuEventSynchronize waits for the test's finish(), else finishes
  CUresult create_result = CUDA_SUCCESS;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  uintptr_t context = 1;
};

FakeGpu* g_gpu = nullptr;

size_t id(CUevent e) {
  return reinterpret_cast<uintptr_t>(e);
}

CUresult ctx_get_current(CUcontext* context) {
  *context = reinterpret_cast<CUcontext>(g_gpu->context);
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* event, unsigned int) {
  std::lock_guard lock(g_gpu->mutex);
  if (g_gpu->create_result != CUDA_SUCCESS) return g_gpu->create_result;
  g_gpu->events.emplace_back();
  *event = reinterpret_cast<CUevent>(static_cast<uintptr_t>(g_gpu->events.size()));
  g_gpu->calls.push_back("create " + std::to_string(id(*event)));
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent event, CUstream) {
  std::lock_guard lock(g_gpu->mutex);
  g_gpu->events.at(id(event) - 1).complete = false;
  g_gpu->calls.push_back("record " + std::to_string(id(event)));
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent event) {
  std::lock_guard lock(g_gpu->mutex);
  return g_gpu->events.at(id(event) - 1).complete ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult event_synchronize(CUevent event) {
  std::unique_lock lock(g_gpu->mutex);
  g_gpu->calls.push_back("sync " + std::to_string(id(event)));
  FakeGpu::Event& e = g_gpu->events.at(id(event) - 1);
  if (g_gpu->sync_waits)
    g_gpu->finished.wait(lock, [&] { return e.complete; });
  else
    e.complete = true;
  return CUDA_SUCCESS;
}
CUresult event_destroy(CUevent event) {
  std::lock_guard lock(g_gpu->mutex);
  g_gpu->calls.push_back("destroy " + std::to_string(id(event)));
  return CUDA_SUCCESS;
}
CUresult stream_is_capturing(CUstream, CUstreamCaptureStatus* status) {
  *status = g_gpu->capture;
  return CUDA_SUCCESS;
}

const DriverCalls& fake_driver() {
  static const DriverCalls driver = [] {
    DriverCalls d{};
    d.ctx_get_current = ctx_get_current;
    d.event_create = event_create;
    d.event_record = event_record;
    d.event_query = event_query;
    d.event_synchronize = event_synchronize;
    d.event_destroy = event_destroy;
    d.stream_is_capturing = stream_is_capturing;
    return d;
  }();
  return driver;
}

const CUstream kStream = reinterpret_cast<CUstream>(uintptr_t{0x5});

using Calls = std::vector<std::string>;

class InFlight : public ::testing::Test {
 protected:
  void SetUp() override { g_gpu = &gpu; }
  void TearDown() override {
    in_flight_release(ctx);
    g_gpu = nullptr;
  }

  // One launch under `bound`, as shim/families.h makes it.
  void launch(uint32_t bound, bool launched = true) {
    in_flight_before_launch(ctx, bound, kStream, false);
    in_flight_after_launch(ctx, bound, kStream, false, launched);
  }
  uint32_t published() { return control_block(ctx)->in_flight.load(); }
  uint32_t tracked() { return control_block(ctx)->in_flight_tracked.load(); }

  FakeGpu gpu;
  ShimContext ctx{&fake_driver};
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
