#include "memory_view.h"

#include <algorithm>
#include <cstdint>

#include "daemon_link.h"
#include "driver_calls.h"

namespace gpushare::shim {

int current_device();  // shim/lifecycle.cpp

namespace {

struct View {
  uint64_t total;
  uint64_t free;
};

// The published view of physical device `device`, if any.
bool find_view(int device, View* out) {
  protocol::ControlBlock* block = control_block();
  if (block == local_control_block()) return false;
  for (auto& v : block->memory_views) {
    uint64_t total = v.total_bytes.load(std::memory_order_acquire);
    if (total == 0 || v.device.load(std::memory_order_relaxed) != device) continue;
    *out = {total, std::min(v.free_bytes.load(std::memory_order_relaxed), total)};
    return true;
  }
  return false;
}

bool nvml_view(nvmlDevice_t device, View* out) {
  auto get_index = driver_calls().nvml_device_get_index;
  unsigned int index = 0;
  // NVML numbers devices physically (it ignores CUDA_VISIBLE_DEVICES), as the daemon does.
  return get_index && get_index(device, &index) == kNvmlSuccess &&
         find_view(static_cast<int>(index), out);
}

}  // namespace

void view_mem_info(size_t* free_bytes, size_t* total_bytes) {
  View v;
  if (!free_bytes || !total_bytes || !find_view(daemon_link_physical_device(current_device()), &v))
    return;
  *total_bytes = v.total;
  *free_bytes = v.free;
}

void view_total_mem(size_t* bytes, CUdevice device) {
  View v;
  if (bytes && find_view(daemon_link_physical_device(device), &v)) *bytes = v.total;
}

void view_nvml_memory(nvmlDevice_t device, nvmlMemory_t* memory) {
  View v;
  if (!memory || !nvml_view(device, &v)) return;
  memory->total = v.total;
  memory->free = v.free;
  memory->used = v.total - v.free;
}

void view_nvml_memory(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  View v;
  if (!memory || !nvml_view(device, &v)) return;
  memory->total = v.total;
  memory->free = v.free;
  memory->reserved = 0;
  memory->used = v.total - v.free;
}

}  // namespace gpushare::shim
