// Fake libnvidia-ml.so.1: the few NVML calls that report device memory and identity, answering from
// the same simulated devices as the fake libcuda.so.1 (so nvidia-smi-style readers see what CUDA
// used), and the per-process list (nvmlDeviceGetComputeRunningProcesses) from the same accounting.
#include <atomic>
#include <cstdio>
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
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;
// NVML_STRUCT_VERSION(Memory, 2): the struct's size with the version in the top byte.
constexpr unsigned int kMemoryV2Version = sizeof(nvmlMemory_v2_t) | (2u << 24);

std::atomic<int> g_init_count{0};
nvmlDevice_st g_devices[gpushare::fake::kMaxDevices];

// nvml.h's nvmlProcessInfo_v1_t, and _v2_t (which the _v2 and _v3 calls fill).
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(ProcessInfoV1) == 16 && sizeof(ProcessInfoV2) == 24);

nvmlReturn_t device_index(nvmlDevice_t device, int* index);

// NVML's contract: with too small an array (or none), INSUFFICIENT_SIZE and the count needed.
template <class Info>
nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int* count, Info* infos) {
  int index = 0;
  if (nvmlReturn_t r = device_index(device, &index); r != kNvmlSuccess) return r;
  if (count == nullptr) return kInvalidArgument;
  gpushare::fake::ProcessMemory listed[gpushare::fake::kMaxProcesses];
  int n = gpushare::fake::processes_on(index, listed, gpushare::fake::kMaxProcesses);
  if (static_cast<unsigned>(n) > *count || (n > 0 && infos == nullptr)) {
    *count = static_cast<unsigned>(n);
    return kInsufficientSize;
  }
  for (int i = 0; i < n; ++i) {
    Info info{};
    info.pid = static_cast<unsigned>(listed[i].pid);
    info.usedGpuMemory = listed[i].bytes;
    if constexpr (sizeof(Info) == sizeof(ProcessInfoV2)) {
      info.gpuInstanceId = 0xFFFFFFFFu;  // no MIG
      info.computeInstanceId = 0xFFFFFFFFu;
    }
    infos[i] = info;
  }
  *count = static_cast<unsigned>(n);
  return kNvmlSuccess;
}

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

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  ProcessInfoV1* infos) {
  return running_processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     ProcessInfoV2* infos) {
  return running_processes(device, count, infos);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     ProcessInfoV2* infos) {
  return running_processes(device, count, infos);
}

// The program's name, from /proc/<pid>/comm (the real call gives the full path).
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  if (g_init_count.load() == 0) return kNvmlErrorUninitialized;
  if (name == nullptr || length == 0) return kInvalidArgument;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/comm", pid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return kNotFound;
  size_t n = std::fread(name, 1, length - 1, f);
  std::fclose(f);
  while (n > 0 && name[n - 1] == '\n') --n;
  name[n] = '\0';
  return kNvmlSuccess;
}
}  // extern "C"
#pragma GCC visibility pop
