// Asynchronous kernels in the fake driver, opt-in with GPUSHARE_FAKE_ASYNC_KERNELS=1 (the default
// stays synchronous: a launch runs its kernel and returns when it is done).
//
// In async mode a launch appends its kernel to a queue and returns at once; one executor thread
// per device of this process takes the kernels in order and runs each with run_kernel (FIFO
// across processes on the device's one engine, as before). Every stream of the process on one
// device shares that queue, so different streams are serialised in launch order: a legal schedule
// for a device with one engine, and one where stream order always holds. A position in the queue
// is the number of kernels enqueued so far; position p is reached when the first p are done.
// Streams, events and synchronisations (context_api.cpp) are positions in this queue.
//
// A full queue (kQueueBound kernels not finished) blocks the launch until there is room, like a
// real driver's full push buffer. At exit the executors stop where they are: queued kernels are
// dropped, and a kernel holding the engine is a dead holder that the next process skips
// (simulated_device.cpp). A fork child starts with empty queues. Nothing here knows the CUDA API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace gpushare::fake {

// Kernels one device queue holds before a launch blocks.
inline constexpr uint64_t kQueueBound = 4096;

// GPUSHARE_FAKE_ASYNC_KERNELS=1: launches are queued. Read once.
bool async_kernels();

// Appends a kernel of `duration_ns` to `device`'s queue (waits while it is full) and returns its
// position.
uint64_t enqueue_kernel(int device, uint64_t duration_ns);

// Kernels enqueued on `device` so far: the position that stands for all of its queued work.
uint64_t queue_tail(int device);

// Whether the first `position` kernels of `device` are done (true once the process is exiting).
bool position_reached(int device, uint64_t position);
void wait_for_position(int device, uint64_t position);

// Waits for every kernel queued so far on every device of this process (no-op in sync mode).
void wait_for_all_queues();

// A point in a queue that remembers when it was reached, for events (elapsed time).
struct QueueMark {
  int device = 0;
  uint64_t position = 0;
  std::atomic<uint64_t> reached_ns{0};  // CLOCK_MONOTONIC; 0 until reached
};
// A mark at `position`: reached (stamped now) at once when the queue is already there, else
// stamped by the executor when the kernel at `position` finishes.
std::shared_ptr<QueueMark> mark_position(int device, uint64_t position);
}  // namespace gpushare::fake
