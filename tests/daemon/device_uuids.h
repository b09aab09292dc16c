// Device UUIDs for the daemon's unit tests: made-up ones, and a shim's device_uuids message
// asking for them.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpushare/protocol/device_uuid.h"
#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {

// A UUID whose bytes count up from `seed`.
inline protocol::DeviceUuid uuid_of(uint8_t seed) {
  protocol::DeviceUuid u{};
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(seed + i);
  return u;
}

// The message of a shim whose CUDA ordinals are `uuids`, in order.
inline protocol::DeviceUuids asking(const std::vector<protocol::DeviceUuid>& uuids) {
  protocol::DeviceUuids m{};
  m.count = static_cast<uint32_t>(uuids.size());
  for (size_t i = 0; i < uuids.size(); ++i) std::memcpy(m.uuids[i], uuids[i].data(), 16);
  return m;
}

}  // namespace gpushare::daemon
