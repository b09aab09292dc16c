// The simulated devices behind the fake driver: one execution engine and one memory capacity per
// device, shared by every process that maps the device file (device_file.h). Used by the fake
// libcuda.so.1 and the fake libnvidia-ml.so.1; nothing here knows the CUDA API.
#pragma once

#include <cstdint>

#include "device_file.h"
#include "simulated_uuid.h"

namespace gpushare::fake {

// Maps the device file, creating and initialising it on first use with GPUSHARE_FAKE_DEVICES
// devices (default 1) of GPUSHARE_FAKE_MEMORY bytes each (default 16 GiB; K/M/G/T suffixes
// allowed). An existing file keeps the configuration it was created with. Returns nullptr when
// the file cannot be created or mapped. Thread-safe; maps once per process.
DeviceFile* open_device_file();

// Number of devices (0 before open_device_file() succeeded).
int device_count();

// Runs one kernel on `device`: waits for the engine in FIFO order across processes, holds it for
// `duration_ns` (sleeping to an absolute deadline) and releases it. Synchronous: a launch calls it
// directly by default; in async mode (kernel_queue.h) the device queue's executor thread does.
void run_kernel(int device, uint64_t duration_ns);

enum class MemoryResult { ok, out_of_memory, too_many_processes };

// Accounts `bytes` to this process on `device`. Device memory fails with out_of_memory when all
// processes together would exceed the capacity; managed memory is counted but never fails (it
// oversubscribes, as unified memory does). Memory of dead processes is reclaimed first.
MemoryResult account_alloc(int device, uint64_t bytes, bool managed);

// Un-accounts memory that process `owner_pid` allocated. A fork child that frees memory it
// inherited changes nothing: the parent still holds its own copy.
void account_free(int device, uint64_t bytes, bool managed, int owner_pid);

struct MemoryInfo {
  uint64_t capacity_bytes;
  uint64_t used_bytes;  // all processes
  uint64_t free_bytes;  // capacity - used, 0 when oversubscribed
};
MemoryInfo memory_info(int device);

// The processes holding memory on `device` (dead ones reclaimed first), as NVML lists them:
// up to `max` of them into `out`; returns how many there are (may exceed `max`).
int processes_on(int device, ProcessMemory* out, int max);

// This process's pid, cached (getpid() is a system call) and refreshed in fork children.
int current_pid();
}  // namespace gpushare::fake
