// Fake libnvidia-ml.so.1: the few NVML calls that report device memory and identity, answering from
// the same simulated devices as the fake libcuda.so.1 (so nvidia-smi-style readers see what CUDA
// used).
#include <atomic>
#include <cstring>

#include "cuda_api.h"
#include "simulated_device.h"

struct nvmlDevice_st {
  int index;
};

namespace {
// NVML return codes (nvml.h).
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;
// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version in the top byte.
constexpr unsigned int kMemoryV2Version = sizeof(nvmlMemory_v2_t) | (2u << 24);

std::atomic<int> g_init_count{0};
nvmlDevice_st g_devices[gpushare::fake::kMaxDevices];

nvmlReturn_t device_index(nvmlDevice_t device, int* index) {
  if (g_init_count.load() == 0) return kNvmlErrorUninitialized;
  for (int i = 0; i < gpushare::fake::device_count(); ++i) {
    if (device == &g_devices[i]) return *index = i, kNvmlSuccess;
  }
  return kInvalidArgument;
}
}  // namespace

#pragma GCC visibility push(default)
extern "C" {

nvmlReturn_t nvmlInit_v2() {
  if (gpushare::fake::open_device_file() == nullptr) return kDriverNotLoaded;
  for (int i = 0; i < gpushare::fake::kMaxDevices; ++i) g_devices[i].index = i;
  g_init_count.fetch_add(1);
  return kNvmlSuccess;
}

nvmlReturn_t nvmlShutdown() {
  int n = g_init_count.load();
  while (n > 0 && !g_init_count.compare_exchange_weak(n, n - 1)) {
  }
  return n > 0 ? kNvmlSuccess : kNvmlErrorUninitialized;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count.load() == 0) return kNvmlErrorUninitialized;
  if (count == nullptr) return kInvalidArgument;
  *count = static_cast<unsigned int>(gpushare::fake::device_count());
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_init_count.load() == 0) return kNvmlErrorUninitialized;
  if (device == nullptr || index >= static_cast<unsigned>(gpushare::fake::device_count())) {
    return kInvalidArgument;
  }
  *device = &g_devices[index];
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  int i = 0;
  if (nvmlReturn_t r = device_index(device, &i); r != kNvmlSuccess) return r;
  if (index == nullptr) return kInvalidArgument;
  *index = static_cast<unsigned int>(i);
  return kNvmlSuccess;
}

// NVML numbers devices physically and ignores CUDA_VISIBLE_DEVICES, like the real one: the UUID
// of index i is the one the fake libcuda.so.1 gives for whichever ordinal is physical device i.
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  int index = 0;
  if (nvmlReturn_t r = device_index(device, &index); r != kNvmlSuccess) return r;
  if (uuid == nullptr) return kInvalidArgument;
  if (length < gpushare::protocol::kDeviceUuidTextSize) return kInsufficientSize;
  char text[gpushare::protocol::kDeviceUuidTextSize];
  gpushare::protocol::format_device_uuid(gpushare::fake::device_uuid(index), text);
  std::memcpy(uuid, text, sizeof text);
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int index = 0;
  if (nvmlReturn_t r = device_index(device, &index); r != kNvmlSuccess) return r;
  if (memory == nullptr) return kInvalidArgument;
  gpushare::fake::MemoryInfo info = gpushare::fake::memory_info(index);
  memory->total = info.capacity_bytes;
  memory->used = info.used_bytes;
  memory->free = info.free_bytes;
  return kNvmlSuccess;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  int index = 0;
  if (nvmlReturn_t r = device_index(device, &index); r != kNvmlSuccess) return r;
  if (memory == nullptr) return kInvalidArgument;
  if (memory->version != kMemoryV2Version) return kArgumentVersionMismatch;
  gpushare::fake::MemoryInfo info = gpushare::fake::memory_info(index);
  memory->total = info.capacity_bytes;
  memory->reserved = 0;
  memory->used = info.used_bytes;
  memory->free = info.free_bytes;
  return kNvmlSuccess;
}
}  // extern "C"
#pragma GCC visibility pop
