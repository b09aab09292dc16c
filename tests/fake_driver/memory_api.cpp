// Fake driver: device memory. A CUdeviceptr is the address of real host memory (an anonymous
// mapping), so copies are memcpy and contents are real; the bytes are accounted on the simulated
// device, shared by all processes, so running out of memory happens between processes for real.
// In async mode (kernel_queue.h) copies and memsets first wait for every kernel the process has
// queued, as the legacy default stream waits for the other streams, so data stays in order.
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "driver_objects.h"
#include "simulated_device.h"

namespace gpushare::fake {
namespace {

// Pitched rows are aligned like the real driver's texture pitch alignment.
constexpr size_t kPitchAlignment = 512;

struct Allocation {
  uint64_t bytes = 0;  // accounted on the device
  size_t mapped = 0;   // length of the host mapping (bytes rounded up to pages)
  int device = 0;
  int owner_pid = 0;  // a fork child frees its inherited copy without un-accounting the parent's
  bool managed = false;
  // Managed memory only: false once prefetched whole to the host, when it takes no device memory.
  bool on_device = true;
};

std::mutex g_lock;
std::map<CUdeviceptr, Allocation> g_allocations;

// A fork child must not inherit g_lock held by a thread that does not exist in the child.
[[maybe_unused]] const int g_fork_guard =
    pthread_atfork([] { g_lock.lock(); }, [] { g_lock.unlock(); }, [] { g_lock.unlock(); });

size_t page_round(uint64_t bytes) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

CUresult allocate(int device, uint64_t bytes, bool managed, CUdeviceptr* ptr) {
  if (ptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (account_alloc(device, bytes, managed) != MemoryResult::ok) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t mapped = page_round(bytes);
  // MAP_NORESERVE: pages cost host memory only once touched, so large fake devices are cheap.
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    account_free(device, bytes, managed, current_pid());
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = reinterpret_cast<CUdeviceptr>(p);
  std::lock_guard lock(g_lock);
  g_allocations[*ptr] = Allocation{bytes, mapped, device, current_pid(), managed};
  return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr ptr) {
  if (ptr == 0) return CUDA_SUCCESS;  // as the real driver: freeing 0 is a no-op
  Allocation a;
  {
    std::lock_guard lock(g_lock);
    auto it = g_allocations.find(ptr);
    if (it == g_allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    g_allocations.erase(it);
  }
  munmap(reinterpret_cast<void*>(ptr), a.mapped);
  if (a.on_device) account_free(a.device, a.bytes, a.managed, a.owner_pid);
  return CUDA_SUCCESS;
}
// Under g_lock: the managed allocation that holds [ptr, ptr + count), or nullptr; `whole` tells
// whether the range is all of it.
Allocation* managed_allocation(CUdeviceptr ptr, size_t count, bool* whole) {
  auto it = g_allocations.upper_bound(ptr);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (!a.managed || ptr + count > it->first + a.bytes) return nullptr;
  *whole = ptr == it->first && count == a.bytes;
  return &a;
}

// Whether [ptr, ptr + count) lies inside one managed allocation.
bool is_managed_range(CUdeviceptr ptr, size_t count) {
  std::lock_guard lock(g_lock);
  bool whole = false;
  return managed_allocation(ptr, count, &whole) != nullptr;
}

// Whether a prefetch of a managed allocation moves it: the whole of it, to where it is not, by
// the process that owns it.
bool moves(const Allocation& a, bool whole, bool to_host) {
  return whole && a.on_device == to_host && a.owner_pid == current_pid();
}

// GPUSHARE_FAKE_PREFETCH_DELAY_US: a prefetch that moves a managed allocation to the host takes
// this long (the call returns when the transfer is over, so a synchronisation after it finds it
// complete), as device -> host migration is slow on real GPUs (tests of streaming swap-out).
std::chrono::microseconds prefetch_to_host_delay() {
  static const std::chrono::microseconds delay{[] {
    const char* v = getenv("GPUSHARE_FAKE_PREFETCH_DELAY_US");
    return v ? strtoull(v, nullptr, 10) : 0;
  }()};
  return delay;
}

// GPUSHARE_FAKE_PREFETCH_FAILS=N: the process's first N prefetches that would move a managed
// allocation to the host fail with CUDA_ERROR_INVALID_DEVICE, what a GPU without concurrent
// managed access answers every prefetch, and move nothing (tests of a move the driver refuses).
// Under g_lock.
bool prefetch_to_host_refused() {
  static uint64_t left = [] {
    const char* v = getenv("GPUSHARE_FAKE_PREFETCH_FAILS");
    return v ? strtoull(v, nullptr, 10) : 0;
  }();
  if (left == 0) return false;
  --left;
  return true;
}

// Device residency of managed memory: a prefetch that covers a whole managed allocation moves it
// (to the host: its bytes leave the device; back: they count again, beyond the capacity if need
// be, as unified memory oversubscribes). Partial ranges are accepted and move nothing.
CUresult prefetch(CUdeviceptr ptr, size_t count, bool to_host, CUstream stream) {
  REQUIRE_INIT();
  int device = 0;
  if (stream != nullptr) {
    if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  } else if (CUresult r = current_device(&device); r == CUDA_SUCCESS) {
    r = capture_conflict(CaptureConflict::legacy_stream, device);
    if (r != CUDA_SUCCESS) return r;
  }
  if (to_host && prefetch_to_host_delay().count() > 0) {
    bool whole = false, moving = false;
    {
      std::lock_guard lock(g_lock);
      Allocation* a = managed_allocation(ptr, count, &whole);
      moving = a && moves(*a, whole, to_host);
    }
    // The transfer, outside the lock: the bytes leave the device when it is over.
    if (moving) std::this_thread::sleep_for(prefetch_to_host_delay());
  }
  std::lock_guard lock(g_lock);
  bool whole = false;
  Allocation* found = managed_allocation(ptr, count, &whole);
  if (!found) return CUDA_ERROR_INVALID_VALUE;
  Allocation& a = *found;
  if (!moves(a, whole, to_host)) return CUDA_SUCCESS;
  if (to_host && prefetch_to_host_refused()) return CUDA_ERROR_INVALID_DEVICE;
  if (to_host) {
    account_free(a.device, a.bytes, true, a.owner_pid);
  } else if (account_alloc(a.device, a.bytes, true) != MemoryResult::ok) {
    return CUDA_ERROR_OUT_OF_MEMORY;  // only when the device's process table is full
  }
  a.on_device = !to_host;
  return CUDA_SUCCESS;
}

bool is_host(CUmemLocation location) {
  return location.type == CU_MEM_LOCATION_TYPE_HOST ||
         location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

CUresult managed_hint(CUdeviceptr ptr, size_t count, CUstream stream) {
  REQUIRE_INIT();
  int device = 0;
  if (stream != nullptr) {
    if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  } else if (CUresult r = current_device(&device); r == CUDA_SUCCESS) {
    r = capture_conflict(CaptureConflict::unsafe_call, device);
    if (r != CUDA_SUCCESS) return r;
  }
  return is_managed_range(ptr, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult alloc_on_stream(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  REQUIRE_INIT();
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  return allocate(device, bytes, false, ptr);
}

CUresult alloc_from_pool(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  REQUIRE_INIT();
  MemoryPool* p = as<MemoryPool>(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  return allocate(p->device, bytes, false, ptr);
}

CUresult free_on_stream(CUdeviceptr ptr, CUstream stream) {
  REQUIRE_INIT();
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  return release(ptr);
}
}  // namespace
}  // namespace gpushare::fake

using namespace gpushare::fake;

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  REQUIRE_INIT();
  int device = 0;
  if (CUresult r = current_device(&device); r != CUDA_SUCCESS) return r;
  if (CUresult r = capture_conflict(CaptureConflict::unsafe_call, device); r != CUDA_SUCCESS)
    return r;
  return allocate(device, bytes, false, ptr);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* ptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  REQUIRE_INIT();
  if (pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult r = current_device(&device); r != CUDA_SUCCESS) return r;
  size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  CUresult r = allocate(device, row * height, false, ptr);
  if (r == CUDA_SUCCESS) *pitch = row;
  return r;
}

CUresult cuMemAllocManaged(CUdeviceptr* ptr, size_t bytes, unsigned int flags) {
  REQUIRE_INIT();
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult r = current_device(&device); r != CUDA_SUCCESS) return r;
  if (CUresult r = capture_conflict(CaptureConflict::unsafe_call, device); r != CUDA_SUCCESS)
    return r;
  return allocate(device, bytes, true, ptr);
}

CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  return alloc_on_stream(ptr, bytes, stream);
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUstream stream) {
  return alloc_on_stream(ptr, bytes, stream);
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream) {
  return alloc_from_pool(ptr, bytes, pool, stream);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  return alloc_from_pool(ptr, bytes, pool, stream);
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  REQUIRE_INIT();
  return release(ptr);
}
CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  return free_on_stream(ptr, stream);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr ptr, CUstream stream) {
  return free_on_stream(ptr, stream);
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REQUIRE_INIT();
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult r = current_device(&device); r != CUDA_SUCCESS) return r;
  MemoryInfo info = memory_info(device);
  *free_bytes = info.free_bytes;
  *total_bytes = info.capacity_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  REQUIRE_INIT();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = memory_info(physical_device(device)).capacity_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  static MemoryPool* const pools = [] {
    auto* p = new MemoryPool[kMaxDevices];
    for (int d = 0; d < kMaxDevices; ++d) p[d].device = d;
    return p;
  }();
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *pool = reinterpret_cast<CUmemoryPool>(&pools[physical_device(device)]);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  REQUIRE_INIT();
  if (dst == 0 || src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  wait_for_all_queues();
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t bytes) {
  return cuMemcpyHtoD_v2(dst, src, bytes);
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  REQUIRE_INIT();
  if (dst == nullptr || src == 0) return CUDA_ERROR_INVALID_VALUE;
  wait_for_all_queues();
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t bytes) {
  return cuMemcpyDtoH_v2(dst, src, bytes);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  REQUIRE_INIT();
  if (dst == 0) return CUDA_ERROR_INVALID_VALUE;
  wait_for_all_queues();
  std::memset(reinterpret_cast<void*>(dst), value, count);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char value, size_t count) {
  return cuMemsetD8_v2(dst, value, count);
}

// Hints about managed memory: accepted for managed ranges only, as the real driver does.
CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, CUmem_advise /*advice*/, CUdevice /*dev*/) {
  return managed_hint(ptr, count, nullptr);
}
CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, CUmem_advise /*advice*/,
                        CUmemLocation /*location*/) {
  return managed_hint(ptr, count, nullptr);
}
CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t count, CUdevice dst, CUstream stream) {
  return prefetch(ptr, count, dst == CU_DEVICE_CPU, stream);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr ptr, size_t count, CUdevice dst, CUstream stream) {
  return prefetch(ptr, count, dst == CU_DEVICE_CPU, stream);
}
CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count, CUmemLocation location,
                               unsigned int /*flags*/, CUstream stream) {
  return prefetch(ptr, count, is_host(location), stream);
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr ptr, size_t count, CUmemLocation location,
                                    unsigned int /*flags*/, CUstream stream) {
  return prefetch(ptr, count, is_host(location), stream);
}
}  // extern "C"
