// The UUID of each simulated device: fixed by its physical index, so that the fake libcuda.so.1
// (cuDeviceGetUuid, CUDA_VISIBLE_DEVICES=GPU-…) and libnvidia-ml.so.1 (nvmlDeviceGetUUID) of every
// process agree on it, as the real ones do, and so that tests can name a device by UUID.
#pragma once

#include <string>

#include "gpushare/protocol/device_uuid.h"

namespace gpushare::fake {

inline protocol::DeviceUuid device_uuid(int device) {
  protocol::DeviceUuid uuid{};
  for (size_t i = 0; i < uuid.size(); ++i)
    uuid[i] = static_cast<uint8_t>(0x5e + 37 * i + 101 * static_cast<size_t>(device));
  uuid[6] = static_cast<uint8_t>(0x40 | (uuid[6] & 0x0f));  // version 4, variant 1, like NVML's
  uuid[8] = static_cast<uint8_t>(0x80 | (uuid[8] & 0x3f));
  return uuid;
}

// "GPU-…", as NVML and CUDA_VISIBLE_DEVICES write it.
inline std::string device_uuid_text(int device) {
  char text[protocol::kDeviceUuidTextSize];
  protocol::format_device_uuid(device_uuid(device), text);
  return text;
}

}  // namespace gpushare::fake
