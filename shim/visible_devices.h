// Which physical device each CUDA ordinal of this process is (docs/protocol.md, "Devices").
//
// An ordinal names a device only within one process: CUDA_VISIBLE_DEVICES ("1", "GPU-8f3c…") and a
// container's own device list renumber them. The driver gives each ordinal's UUID, which names one
// device on the whole machine; the daemon, which sees every device, answers with their physical
// indices. Everything here runs at registration, never on the launch path; the launch path does not
// look at devices at all.
#pragma once

#include <atomic>
#include <cstdint>

#include "gpushare/protocol/wire.h"

namespace gpushare::shim {

// Physical indices by ordinal; count 0: not known (the job is registered for any device).
struct DeviceTable {
  uint32_t count = 0;
  int32_t physical[protocol::kMaxDevices] = {};
};

// CUDA_VISIBLE_DEVICES as a list of physical indices ("2,3"), the fallback when the daemon cannot
// place a UUID. Count 0 when unset, empty, or not a plain list of indices (UUID or MIG forms).
DeviceTable numeric_visible_devices(const char* value);

// The table after the daemon's answer to the UUIDs of `asked` ordinals: its indices when it placed
// every one of them, else `fallback`. *unplaced: the first ordinal it could not place, or -1.
DeviceTable resolved_devices(const protocol::DeviceMap& map, uint32_t asked,
                             const DeviceTable& fallback, int* unplaced);

// The table in force, read by any thread (memory declarations, views); written at registration.
void set_device_table(const DeviceTable& table);
DeviceTable device_table();
// The physical index of an ordinal: the table's, else the ordinal itself.
int physical_device(int ordinal);

}  // namespace gpushare::shim
