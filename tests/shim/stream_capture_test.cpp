// The exclusion between the program's stream captures and the swap thread's memory moves
// (shim/stream_capture.h). Orderings, not times: a move that must wait is seen not to have begun
// while the capture is in progress, and to begin once it ends; the only timed assertion is a
// patience running out, which holds on any machine because the capture never ends.
#include "stream_capture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace gpushare::shim {
namespace {

using namespace std::chrono_literals;

const CUstream kStream = reinterpret_cast<CUstream>(uintptr_t{0x10});
const CUstream kOther = reinterpret_cast<CUstream>(uintptr_t{0x20});

// A capture as the hooks count one that began.
void begin(CaptureExclusion& captures, CaptureKey key) {
  captures.before_begin();
  captures.after_begin(key, true);
}

TEST(CaptureExclusion, AMoveWaitsForTheCaptureInProgressAndBeginsAtItsEnd) {
  CaptureExclusion captures;
  begin(captures, {kStream, 0});
  std::atomic<bool> moving{false};
  std::thread swap([&] {
    EXPECT_TRUE(captures.begin_move(10min)) << "the capture ended: the move had no need to hurry";
    moving = true;
    captures.end_move();
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(moving) << "a move began beside a capture in progress";
  captures.after_end({kStream, 0}, /*over=*/true);
  swap.join();
  EXPECT_TRUE(moving);
  EXPECT_EQ(captures.in_progress(), 0u);
}

TEST(CaptureExclusion, ACaptureThatBeginsDuringAMoveWaitsForItsEnd) {
  CaptureExclusion captures;
  ASSERT_TRUE(captures.begin_move(0ms));
  std::atomic<bool> began{false};
  std::thread program([&] {
    captures.before_begin();
    began = true;
    captures.after_begin({kStream, 0}, true);
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(began) << "a capture began during a move";
  captures.end_move();
  program.join();
  EXPECT_TRUE(began);
  EXPECT_EQ(captures.in_progress(), 1u);
}

TEST(CaptureExclusion, OnlyCapturesThatBeganAndHaveNotEndedCount) {
  CaptureExclusion captures;
  captures.before_begin();
  EXPECT_EQ(captures.in_progress(), 1u) << "a capture beginning already holds moves off";
  captures.after_begin({kStream, 0}, /*began=*/false);
  EXPECT_EQ(captures.in_progress(), 0u) << "a refused cuStreamBeginCapture";
  begin(captures, {kStream, 0});
  captures.after_end({kStream, 0}, /*over=*/false);  // cuStreamEndCapture from the wrong thread
  EXPECT_EQ(captures.in_progress(), 1u);
  captures.after_end({kOther, 0}, true);  // a capture the shim never saw begin
  EXPECT_EQ(captures.in_progress(), 1u);
  captures.after_end({kStream, 0}, true);
  EXPECT_EQ(captures.in_progress(), 0u);
}

TEST(CaptureExclusion, APatienceThatRunsOutLetsTheMoveGoAheadAndSaysSo) {
  CaptureExclusion captures;
  begin(captures, {kStream, 0});
  EXPECT_FALSE(captures.begin_move(20ms)) << "the capture is still in progress";
  // The move holds captures off now, as any move does.
  auto next = std::async(std::launch::async, [&] {
    captures.before_begin();
    captures.after_begin({kOther, 0}, true);
  });
  EXPECT_EQ(next.wait_for(50ms), std::future_status::timeout);
  captures.end_move();
  next.get();
  EXPECT_EQ(captures.in_progress(), 2u);
}

// A move that went ahead beside a capture invalidated it: the next move does not wait for that
// capture again (a leaked capture costs one patience, not one per move), but it waits for a
// capture begun since, which is intact.
TEST(CaptureExclusion, ACaptureAMoveWentAheadBesideIsNotWaitedForAgain) {
  CaptureExclusion captures;
  begin(captures, {kStream, 0});
  EXPECT_FALSE(captures.begin_move(20ms));
  captures.end_move();
  auto again = std::async(std::launch::async, [&] {
    bool clear = captures.begin_move(10s);  // waited for again: 10 s, then the test fails
    captures.end_move();
    return clear;
  });
  ASSERT_EQ(again.wait_for(5s), std::future_status::ready) << "the move waited for it again";
  EXPECT_TRUE(again.get());
  EXPECT_EQ(captures.in_progress(), 1u) << "it is still the program's to end";

  begin(captures, {kOther, 0});
  EXPECT_FALSE(captures.begin_move(20ms)) << "a capture begun since is intact: waited for";
  captures.end_move();
  captures.after_end({kStream, 0}, true);
  captures.after_end({kOther, 0}, true);
  EXPECT_EQ(captures.in_progress(), 0u);
}

TEST(CaptureKey, ThePerThreadStreamIsEachThreadsOwn) {
  const CaptureKey here = capture_key(nullptr, /*per_thread=*/true);
  CaptureKey there{};
  std::thread([&] { there = capture_key(nullptr, true); }).join();
  EXPECT_NE(here, there);
  EXPECT_EQ(capture_key(CU_STREAM_PER_THREAD, false), here);
  EXPECT_EQ(capture_key(kStream, true), (CaptureKey{kStream, 0})) << "a created stream is itself";
  std::thread([&] { there = capture_key(kStream, true); }).join();
  EXPECT_EQ(there, capture_key(kStream, false));
}

}  // namespace
}  // namespace gpushare::shim
