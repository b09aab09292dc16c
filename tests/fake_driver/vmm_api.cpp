// Fake driver: the virtual memory management API (what PyTorch's expandable segments use).
//
// Model: cuMemCreate makes a memfd of the requested size (accounted on the device until
// cuMemRelease). cuMemAddressReserve reserves an inaccessible anonymous range. cuMemMap maps the
// memfd at the reserved address with MAP_FIXED, so several mappings of one handle alias the same
// bytes and contents survive unmap/remap; cuMemSetAccess makes the range readable/writable, as on
// the real driver memory is inaccessible until then. cuMemUnmap puts the inaccessible
// reservation back. The mapping keeps the memfd's pages alive after cuMemRelease, as the real
// driver defers the free until the last unmap; only the accounting ends at release.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <map>

#include "driver_objects.h"
#include "simulated_device.h"

namespace gpushare::fake {
namespace {

// The real driver's granularity on current GPUs (2 MiB pages).
constexpr size_t kGranularity = 2u << 20;

std::mutex g_lock;
std::map<CUdeviceptr, size_t> g_reservations;  // base -> size

[[maybe_unused]] const int g_fork_guard =
    pthread_atfork([] { g_lock.lock(); }, [] { g_lock.unlock(); }, [] { g_lock.unlock(); });

bool aligned(uint64_t v) {
  return v % kGranularity == 0;
}

// Whether [ptr, ptr + size) lies inside one reservation.
bool reserved_range(CUdeviceptr ptr, size_t size) {
  std::lock_guard lock(g_lock);
  auto it = g_reservations.upper_bound(ptr);
  if (it == g_reservations.begin()) return false;
  --it;
  return ptr + size <= it->first + it->second;
}

int protection(CUmemAccess_flags flags) {
  switch (flags) {
    case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
      return PROT_READ | PROT_WRITE;
    case CU_MEM_ACCESS_FLAGS_PROT_READ:
      return PROT_READ;
    default:
      return PROT_NONE;
  }
}
}  // namespace
}  // namespace gpushare::fake

using namespace gpushare::fake;

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags /*option*/) {
  REQUIRE_INIT();
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  REQUIRE_INIT();
  if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0 || !aligned(bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!valid_device(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  int device = physical_device(prop->location.id);
  if (account_alloc(device, bytes, false) != MemoryResult::ok) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("gpushare-fake-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) close(fd);
    account_free(device, bytes, false, current_pid());
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* m = new PhysicalMemory;
  m->device = device;
  m->bytes = bytes;
  m->memfd = fd;
  m->owner_pid = current_pid();
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(m);
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REQUIRE_INIT();
  PhysicalMemory* m = as<PhysicalMemory>(reinterpret_cast<void*>(handle));
  if (m == nullptr) return CUDA_ERROR_INVALID_VALUE;
  close(m->memfd);
  account_free(m->device, m->bytes, false, m->owner_pid);
  destroy(m);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr /*addr*/,
                             unsigned long long flags) {
  REQUIRE_INIT();
  if (ptr == nullptr || size == 0 || !aligned(size) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  size_t align = alignment > kGranularity ? alignment : kGranularity;
  if (align % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
  // Over-reserve, then trim both ends to an aligned range of `size` bytes.
  size_t span = size + align;
  void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  uintptr_t base = (raw + align - 1) / align * align;
  if (base > raw) munmap(p, base - raw);
  if (raw + span > base + size)
    munmap(reinterpret_cast<void*>(base + size), raw + span - base - size);
  std::lock_guard lock(g_lock);
  g_reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  REQUIRE_INIT();
  std::lock_guard lock(g_lock);
  auto it = g_reservations.find(ptr);
  if (it == g_reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(ptr), size);
  g_reservations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  REQUIRE_INIT();
  PhysicalMemory* m = as<PhysicalMemory>(reinterpret_cast<void*>(handle));
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0 || size == 0 || !aligned(ptr) || !aligned(size) || !aligned(offset) ||
      offset + size > m->bytes || !reserved_range(ptr, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, m->memfd,
                 static_cast<off_t>(offset));
  return p == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  REQUIRE_INIT();
  if (size == 0 || !aligned(ptr) || !aligned(size) || !reserved_range(ptr, size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  REQUIRE_INIT();
  if (desc == nullptr || count == 0 || !reserved_range(ptr, size)) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !valid_device(desc[i].location.id)) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    prot |= protection(desc[i].flags);
  }
  return mprotect(reinterpret_cast<void*>(ptr), size, prot) == 0 ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
}
}  // extern "C"
