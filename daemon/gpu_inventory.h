// The machine's GPUs by UUID: which physical index each UUID has. A shim only knows the UUIDs of
// its own CUDA ordinals (CUDA_VISIBLE_DEVICES and containers renumber them per process); the
// daemon, which sees every device, places them (docs/protocol.md, "Devices").
//
// The physical index is NVML's, the one nvidia-smi shows and `policy.devices` / `memory.devices`
// of the configuration name. NVML is loaded with dlopen, so the daemon runs (and places nothing)
// where it is absent.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "gpushare/protocol/device_uuid.h"
#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {

struct GpuInventory {
  std::map<protocol::DeviceUuid, int> index_of;  // UUID -> physical index

  // The UUID of a physical index, in `gpusharectl status` ("GPU-…"); "" when not in the inventory.
  std::string uuid_text(int index) const;

  // Asks NVML (libnvidia-ml.so.1) for every device's index and UUID. Empty, with *why, when the
  // library is missing or fails; a device NVML cannot name is left out.
  static GpuInventory from_nvml(std::string* why);
};

// Why a shim's device_uuids is malformed, or "" (count 1..kMaxDevices, reserved 0, unused entries
// zero).
std::string check_device_uuids(const protocol::DeviceUuids& uuids);

// The physical index of each ordinal, kUnknownDevice for a UUID not in the inventory.
protocol::DeviceMap place_devices(const GpuInventory& inventory,
                                  const protocol::DeviceUuids& uuids);

}  // namespace gpushare::daemon
