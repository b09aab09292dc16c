// Memory oversubscription inside the job's process (docs/memory.md). An opportunistic job's
// cuMemAlloc_v2 becomes unified (managed) memory with the device as preferred location, so that
// its pages can be moved to host and back while every pointer stays valid. A background thread
// obeys the daemon's requests in the control block (memory_target / memory_request_seq): it
// prefetches all swappable memory to host or back (or, bounded by memory_target_bytes, part of it
// back: rotation's prefetch), then acknowledges (memory_done_seq). Only this process can do it:
// it owns the context.
#pragma once

#include <cstdint>

#include "cuda_api.h"

namespace gpushare::shim {

// True for a registered opportunistic job: its plain device allocations become managed memory.
bool allocates_swappable();

// cuMemAllocManaged + preferred location on the current device.
CUresult alloc_swappable(CUdeviceptr* ptr, size_t bytes);

// Managed memory the swap thread moves, with the context it was made in. A new allocation of a
// job whose memory is on host now joins it there. Starts the swap thread on first use.
void track_swappable(uint64_t ptr, uint64_t bytes, int device);
// Before the free of managed memory: waits for a move in progress, then forgets the allocation.
// Returns false when it was not tracked.
bool untrack_swappable(uint64_t ptr);
// The free failed: the allocation is still there.
void retrack_swappable(uint64_t ptr, uint64_t bytes, int device);

// The physical memory of every visible device: fills totals[ordinal]; returns the count.
int device_totals(uint64_t* totals, int max);

// pthread_atfork child handler: the swap thread does not exist in the child.
void swap_after_fork_child();

}  // namespace gpushare::shim
