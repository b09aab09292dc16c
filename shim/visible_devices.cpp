#include "visible_devices.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace gpushare::shim {
namespace {

// Relaxed atomics: entries are written before the count, and a reader racing a re-registration
// sees the same values again (UUIDs do not move between registrations).
std::atomic<uint32_t> g_count{0};
std::atomic<int32_t> g_physical[protocol::kMaxDevices];

}  // namespace

DeviceTable numeric_visible_devices(const char* value) {
  DeviceTable table;
  if (!value || !*value) return table;
  const char* p = value;
  while (*p) {
    char* end = nullptr;
    errno = 0;
    long index = std::strtol(p, &end, 10);
    if (end == p || errno != 0 || index < 0 || index > protocol::kMaxDeviceIndex ||
        (*end && *end != ',') || table.count == protocol::kMaxDevices)
      return DeviceTable{};
    table.physical[table.count++] = static_cast<int32_t>(index);
    p = *end ? end + 1 : end;
  }
  return table;
}

DeviceTable resolved_devices(const protocol::DeviceMap& map, uint32_t asked,
                             const DeviceTable& fallback, int* unplaced) {
  *unplaced = -1;
  if (asked == 0 || asked > protocol::kMaxDevices || map.count != asked) {
    *unplaced = 0;
    return fallback;
  }
  DeviceTable table;
  for (uint32_t i = 0; i < asked; ++i) {
    int32_t physical = map.physical[i];
    if (physical < 0 || physical > protocol::kMaxDeviceIndex) {
      *unplaced = static_cast<int>(i);
      return fallback;
    }
    table.physical[i] = physical;
  }
  table.count = asked;
  return table;
}

void set_device_table(const DeviceTable& table) {
  for (uint32_t i = 0; i < table.count; ++i)
    g_physical[i].store(table.physical[i], std::memory_order_relaxed);
  g_count.store(table.count, std::memory_order_release);
}

DeviceTable device_table() {
  DeviceTable table;
  table.count = g_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < table.count; ++i)
    table.physical[i] = g_physical[i].load(std::memory_order_relaxed);
  return table;
}

int physical_device(int ordinal) {
  if (ordinal >= 0 && static_cast<uint32_t>(ordinal) < g_count.load(std::memory_order_acquire))
    return g_physical[ordinal].load(std::memory_order_relaxed);
  return ordinal;
}

}  // namespace gpushare::shim
