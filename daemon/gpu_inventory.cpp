#include "gpu_inventory.h"

#include <dlfcn.h>

#include <cstring>

namespace gpushare::daemon {
namespace {

// The few NVML entry points used (nvml.h); the daemon does not build against NVML's header.
using NvmlReturn = int;
using NvmlDevice = struct nvmlDevice_st*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

template <class Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

GpuInventory GpuInventory::from_nvml(std::string* why) {
  GpuInventory inventory;
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    *why = std::string("cannot load libnvidia-ml.so.1: ") + dlerror();
    return inventory;
  }
  auto init = symbol<NvmlReturn (*)()>(library, "nvmlInit_v2");
  auto shutdown = symbol<NvmlReturn (*)()>(library, "nvmlShutdown");
  auto count_fn = symbol<NvmlReturn (*)(unsigned*)>(library, "nvmlDeviceGetCount_v2");
  auto handle_fn =
      symbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(library, "nvmlDeviceGetHandleByIndex_v2");
  auto uuid_fn = symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(library, "nvmlDeviceGetUUID");
  unsigned count = 0;
  if (!init || !shutdown || !count_fn || !handle_fn || !uuid_fn) {
    *why =
        "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2, "
        "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetUUID";
  } else if (NvmlReturn r = init(); r != kNvmlSuccess) {
    *why = "nvmlInit_v2 failed with NVML error " + std::to_string(r);
  } else {
    if (NvmlReturn r = count_fn(&count); r != kNvmlSuccess)
      *why = "nvmlDeviceGetCount_v2 failed with NVML error " + std::to_string(r);
    for (unsigned i = 0; i < count && i <= static_cast<unsigned>(protocol::kMaxDeviceIndex); ++i) {
      NvmlDevice device = nullptr;
      char text[kUuidBufferSize] = {};
      if (handle_fn(i, &device) != kNvmlSuccess ||
          uuid_fn(device, text, sizeof text) != kNvmlSuccess)
        continue;
      text[sizeof text - 1] = '\0';
      // A MIG-enabled GPU still has its own GPU- UUID; MIG instances are not listed here.
      if (auto uuid = protocol::parse_device_uuid(text))
        inventory.index_of.emplace(*uuid, static_cast<int>(i));
    }
    shutdown();
  }
  dlclose(library);
  return inventory;
}

std::string GpuInventory::uuid_text(int index) const {
  for (const auto& [uuid, i] : index_of) {
    if (i != index) continue;
    char text[protocol::kDeviceUuidTextSize];
    protocol::format_device_uuid(uuid, text);
    return text;
  }
  return "";
}

std::string check_device_uuids(const protocol::DeviceUuids& uuids) {
  if (uuids.count == 0 || uuids.count > protocol::kMaxDevices)
    return "device count " + std::to_string(uuids.count) + " is not in 1.." +
           std::to_string(protocol::kMaxDevices);
  if (uuids.reserved != 0) return "reserved field is not 0";
  for (uint32_t i = uuids.count; i < protocol::kMaxDevices; ++i)
    for (uint8_t byte : uuids.uuids[i])
      if (byte != 0) return "UUID entries past the device count are not 0";
  return "";
}

protocol::DeviceMap place_devices(const GpuInventory& inventory,
                                  const protocol::DeviceUuids& uuids) {
  protocol::DeviceMap map{};
  map.count = uuids.count;
  for (uint32_t i = 0; i < uuids.count && i < protocol::kMaxDevices; ++i) {
    protocol::DeviceUuid uuid;
    std::memcpy(uuid.data(), uuids.uuids[i], uuid.size());
    auto found = inventory.index_of.find(uuid);
    map.physical[i] = found == inventory.index_of.end() ? protocol::kUnknownDevice : found->second;
  }
  return map;
}

}  // namespace gpushare::daemon
