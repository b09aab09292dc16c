// Layout of the fake driver's simulated devices, shared between processes through one
// shared-memory file (GPUSHARE_FAKE_DEVICE_FILE, default /dev/shm/gpushare-fake-<uid>).
//
// The fake driver (libcuda.so.1, libnvidia-ml.so.1) maps it read-write; tests read it through
// fake_device_view.h. Plain fields only, so that both sides agree on the layout; fields written
// concurrently are accessed with atomic builtins.
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace gpushare::fake {

inline constexpr uint32_t kDeviceFileMagic = 0x66737067;  // "gpsf"
inline constexpr uint32_t kDeviceFileLayout = 1;
inline constexpr int kMaxDevices = 8;
// Processes that may hold memory on one device at once (dead ones are reclaimed).
inline constexpr int kMaxProcesses = 256;
// Tickets that may be outstanding on one engine at once (threads of all processes waiting).
inline constexpr uint32_t kTicketSlots = 1024;

struct ProcessMemory {
  int32_t pid;  // 0: free slot
  uint32_t reserved;
  uint64_t bytes;          // all memory of this process on the device, managed included
  uint64_t managed_bytes;  // the managed part
};

// The one execution engine of a device: a FIFO ticket lock across processes. Taking a ticket
// (under DeviceState::lock) also records the taker's pid, so that a waiter can skip the ticket of
// a process that died while holding or waiting for the engine.
struct Engine {
  uint32_t next_ticket;  // guarded by DeviceState::lock
  uint32_t now_serving;  // futex word: the ticket that holds the engine
  // Threads sleeping on now_serving: the releaser makes the wake system call only if any. A
  // waiter killed while asleep leaves it one too high, which costs only spurious wakes.
  uint32_t waiters;
  uint32_t reserved;
  int32_t ticket_pid[kTicketSlots];  // ticket t was taken by ticket_pid[t % kTicketSlots]
};

struct DeviceState {
  pthread_mutex_t lock;     // robust, process-shared: guards memory and ticket taking
  uint64_t capacity_bytes;  // fixed at creation
  uint64_t used_bytes;      // sum of processes[].bytes (managed memory may exceed capacity)
  uint64_t managed_bytes;   // sum of processes[].managed_bytes
  ProcessMemory processes[kMaxProcesses];
  uint64_t kernels;  // kernels executed (atomic)
  uint64_t busy_ns;  // nanoseconds the engine was held by kernels (atomic)
  Engine engine;
};

struct DeviceFile {
  uint32_t magic;  // written last, once the file is initialised
  uint32_t layout;
  uint32_t device_count;
  uint32_t reserved;
  DeviceState devices[kMaxDevices];
};

// Where the device file lives: GPUSHARE_FAKE_DEVICE_FILE, else /dev/shm/gpushare-fake-<uid>.
inline std::string device_file_path() {
  if (const char* p = std::getenv("GPUSHARE_FAKE_DEVICE_FILE"); p != nullptr && *p != '\0') {
    return p;
  }
  return "/dev/shm/gpushare-fake-" + std::to_string(getuid());
}
}  // namespace gpushare::fake
