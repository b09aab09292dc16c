// The per-device kernel queues of async mode (kernel_queue.h says what they model). Each queue is
// a mutex-guarded list of kernel durations with two counters, `enqueued` and `completed`; its
// executor thread, started by the first launch, pops a duration, runs it on the simulated engine
// outside the lock, then counts it and stamps the event marks it reached. The queues live on the
// heap and are never destroyed, so a detached executor still running while the process exits
// touches nothing that static destruction took away.
#include "kernel_queue.h"

#include <pthread.h>
#include <time.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <thread>

#include "device_file.h"
#include "simulated_device.h"

namespace gpushare::fake {
namespace {

struct Queue {
  std::mutex lock;
  std::condition_variable work;      // to the executor: a kernel was queued, or stop
  std::condition_variable progress;  // to waiters: a kernel finished (room, positions), or stop
  std::deque<uint64_t> waiting;      // durations of the queued kernels not started yet
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  std::multimap<uint64_t, std::shared_ptr<QueueMark>> marks;  // not reached yet, by position
  bool executor_started = false;
};

Queue* g_queues = nullptr;  // kMaxDevices of them once the first is used; never freed
std::once_flag g_queues_once;
// Set at exit: executors stop, queued kernels are dropped, and every wait returns at once (a
// program's own atexit handlers may still synchronise, and must not hang).
std::atomic<bool> g_stopping{false};

uint64_t clock_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool stopping() {
  return g_stopping.load(std::memory_order_acquire);
}

// Under q.lock: stamps the marks the queue has reached (all of them when `all`).
void stamp_reached(Queue& q, bool all) {
  const uint64_t now = clock_ns();
  while (!q.marks.empty() && (all || q.marks.begin()->first <= q.completed)) {
    q.marks.begin()->second->reached_ns.store(now, std::memory_order_release);
    q.marks.erase(q.marks.begin());
  }
}

// Under q.lock: forgets the queued kernels as if they had run (at exit, and in a fork child,
// where they are the parent's).
void abandon(Queue& q) {
  q.waiting.clear();
  q.completed = q.enqueued;
  stamp_reached(q, true);
}

void stop_all() {
  g_stopping.store(true, std::memory_order_release);
  for (int d = 0; d < kMaxDevices; ++d) {
    Queue& q = g_queues[d];
    {
      std::lock_guard lock(q.lock);
      abandon(q);
    }
    q.work.notify_all();
    q.progress.notify_all();
  }
}

void lock_all() {
  for (int d = 0; d < kMaxDevices; ++d) g_queues[d].lock.lock();
}
void unlock_all() {
  for (int d = 0; d < kMaxDevices; ++d) g_queues[d].lock.unlock();
}
// The child has none of the parent's threads: no executor, no waiter.
void reset_in_child() {
  for (int d = 0; d < kMaxDevices; ++d) {
    Queue& q = g_queues[d];
    abandon(q);
    q.executor_started = false;
    q.lock.unlock();
    new (&q.work) std::condition_variable;
    new (&q.progress) std::condition_variable;
  }
}

Queue& queue(int device) {
  std::call_once(g_queues_once, [] {
    g_queues = new Queue[kMaxDevices];
    pthread_atfork(lock_all, unlock_all, reset_in_child);
    std::atexit(stop_all);
  });
  return g_queues[device];
}

void execute(int device) {
  Queue& q = g_queues[device];
  for (;;) {
    uint64_t duration_ns = 0;
    {
      std::unique_lock lock(q.lock);
      q.work.wait(lock, [&] { return stopping() || !q.waiting.empty(); });
      if (stopping()) return;
      duration_ns = q.waiting.front();
      q.waiting.pop_front();
    }
    run_kernel(device, duration_ns);
    {
      std::lock_guard lock(q.lock);
      if (stopping()) return;  // stop_all already counted this kernel
      ++q.completed;
      stamp_reached(q, false);
    }
    q.progress.notify_all();
  }
}
}  // namespace

bool async_kernels() {
  static const bool on = [] {
    const char* v = std::getenv("GPUSHARE_FAKE_ASYNC_KERNELS");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

uint64_t enqueue_kernel(int device, uint64_t duration_ns) {
  Queue& q = queue(device);
  std::unique_lock lock(q.lock);
  q.progress.wait(lock, [&] { return stopping() || q.enqueued - q.completed < kQueueBound; });
  if (stopping()) return q.enqueued;  // exiting: the kernel is dropped like the queued ones
  if (!q.executor_started) {
    std::thread(execute, device).detach();
    q.executor_started = true;
  }
  q.waiting.push_back(duration_ns);
  const uint64_t position = ++q.enqueued;
  lock.unlock();
  q.work.notify_one();
  return position;
}

uint64_t queue_tail(int device) {
  Queue& q = queue(device);
  std::lock_guard lock(q.lock);
  return q.enqueued;
}

bool position_reached(int device, uint64_t position) {
  Queue& q = queue(device);
  std::lock_guard lock(q.lock);
  return stopping() || q.completed >= position;
}

void wait_for_position(int device, uint64_t position) {
  Queue& q = queue(device);
  std::unique_lock lock(q.lock);
  q.progress.wait(lock, [&] { return stopping() || q.completed >= position; });
}

void wait_for_all_queues() {
  if (!async_kernels()) return;
  for (int d = 0; d < kMaxDevices; ++d) wait_for_position(d, queue_tail(d));
}

std::shared_ptr<QueueMark> mark_position(int device, uint64_t position) {
  auto mark = std::make_shared<QueueMark>();
  mark->device = device;
  mark->position = position;
  Queue& q = queue(device);
  std::lock_guard lock(q.lock);
  if (stopping() || q.completed >= position) {
    mark->reached_ns.store(clock_ns(), std::memory_order_release);
  } else {
    q.marks.emplace(position, mark);
  }
  return mark;
}
}  // namespace gpushare::fake
