// CUDA_VISIBLE_DEVICES as the real driver reads it at cuInit: which physical devices the process
// sees, in which order (its ordinal 0 is the first listed). Pure, so the fake's unit tests drive
// it.
//
// The rules, as the real driver applies them: unset means every device in physical order; the
// value is a comma-separated list whose entries are a physical index ("1") or a device's UUID
// ("GPU-" and hex digits, where a unique prefix of the UUID is enough and dashes are ignored);
// the list ends at the first entry that names no device (out of range, unknown or ambiguous UUID,
// a MIG instance, anything else) or names one already listed, so "0,7,1" on two devices is "0"
// and "" is no device at all. Surrounding blanks of an entry are ignored.
#pragma once

#include <vector>

#include "gpushare/protocol/device_uuid.h"

namespace gpushare::fake {

// `uuids[i]` is the UUID of physical device i. `value` nullptr: the variable is unset.
std::vector<int> visible_devices(const char* value, const std::vector<protocol::DeviceUuid>& uuids);

}  // namespace gpushare::fake
