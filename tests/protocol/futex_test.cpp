// protocol/futex.h: a wake reaches a waiter, a wait on a word that already moved returns at once,
// and a wait with nobody to wake it ends at its timeout (a dead waker costs a period, not a life).
#include "gpushare/protocol/futex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

namespace gpushare::protocol {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Futex, AWaitOnAWordThatMovedReturnsAtOnce) {
  std::atomic<uint32_t> word{5};
  auto start = Clock::now();
  futex_wait(&word, 4, 10'000'000'000);  // expects 4, finds 5: no sleep at all
  futex_wait_private(&word, 4, 10'000'000'000);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(Futex, AWaitWithNobodyToWakeItEndsAtItsTimeout) {
  std::atomic<uint32_t> word{0};
  auto start = Clock::now();
  futex_wait(&word, 0, 20'000'000);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(15));
}

TEST(Futex, AWakeFromAnotherProcessReachesAWaiterOnSharedMemory) {
  // The control block's case: the word is in memory two processes map, waiter and waker differ.
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* word = new (page) std::atomic<uint32_t>(0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    word->store(1);
    futex_wake_all(word);
    _exit(0);
  }
  auto start = Clock::now();
  while (word->load() == 0) futex_wait(word, 0, 30'000'000'000);  // 30 s: only a wake ends it
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  int status = 0;
  waitpid(child, &status, 0);
  munmap(page, 4096);
}

TEST(Futex, APrivateWakeReachesAThreadOfTheSameProcess) {
  std::atomic<uint32_t> word{0};
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    word.store(1);
    futex_wake_one_private(&word);
  });
  auto start = Clock::now();
  while (word.load() == 0) futex_wait_private(&word, 0, 30'000'000'000);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  waker.join();
}

}  // namespace
}  // namespace gpushare::protocol
