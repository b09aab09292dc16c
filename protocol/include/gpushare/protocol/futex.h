// Futex waits and wakes on the 32-bit words of a control block (gate_seq, memory_request_seq),
// written once for the shim and the daemon.
//
// The control block is memory shared between processes, so its waits and wakes are the shared
// kind (not FUTEX_PRIVATE): the waiter is in one process, the waker in another. A word private to
// one process (a thread's sleep) uses the `_private` forms, which are cheaper. Every wait has a
// timeout: a waker that dies between its store and its wake must cost a waiter a period, never
// its life.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

namespace gpushare::protocol {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word is a plain 32-bit word");

namespace futex_detail {
inline long call(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}
inline timespec span(int64_t timeout_ns) {
  return timespec{static_cast<time_t>(timeout_ns / 1000000000),
                  static_cast<long>(timeout_ns % 1000000000)};
}
}  // namespace futex_detail

// Sleeps while *word == expected, at most `timeout_ns` (or until woken or a signal).
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec t = futex_detail::span(timeout_ns);
  futex_detail::call(word, FUTEX_WAIT, expected, &t);
}

// Wakes every waiter on `word`, in any process that maps it.
inline void futex_wake_all(std::atomic<uint32_t>* word) {
  futex_detail::call(word, FUTEX_WAKE, INT_MAX, nullptr);
}

// The same for a word only this process uses.
inline void futex_wait_private(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec t = futex_detail::span(timeout_ns);
  futex_detail::call(word, FUTEX_WAIT_PRIVATE, expected, &t);
}

inline void futex_wake_one_private(std::atomic<uint32_t>* word) {
  futex_detail::call(word, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

}  // namespace gpushare::protocol
