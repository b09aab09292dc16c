// The machine's GPUs by UUID and the shim's question which of them its CUDA ordinals are
// (gpu_inventory.h, docs/protocol.md "Devices"). The answer sets the job's devices, so it is
// accounted, scheduled and swapped on the right ones. Like the shim sessions (shim_sessions.h),
// the component works on the registry it is given and asks the rest of the daemon, through hooks,
// for NVML's inventory, to send a reply, drop a client or warn, so every answer and refusal is
// tested alone (tests/daemon/device_sessions_test.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "client_hooks.h"
#include "connection_table.h"
#include "gpu_inventory.h"
#include "gpushare/protocol/wire.h"
#include "registry.h"

namespace gpushare::daemon {

// What the sessions ask of the rest of the daemon.
struct DeviceHooks {
  // The machine's GPUs now (GpuInventory::from_nvml): empty, with *why, where NVML cannot tell.
  std::function<GpuInventory(std::string* why)> load;
  ReplyFrame reply;
  DropClient drop;
  WarnLimited warn;
};

// NVML is asked again for a UUID it did not know (a GPU that appeared after the daemon started, a
// driver that was not loaded yet) at most this often: it blocks the event loop while it runs.
inline constexpr std::chrono::seconds kInventoryRetry{30};

class DeviceSessions {
 public:
  using Clock = std::chrono::steady_clock;
  DeviceSessions(Registry& registry, DeviceHooks hooks)
      : registry_(registry), hooks_(std::move(hooks)) {}

  // Asks NVML for the inventory (at start, and again from on_uuids) and logs what it found.
  void load(Clock::time_point now);
  // A registered shim's UUIDs: dropped when malformed or sent without a job; else answered with
  // each ordinal's physical index (kUnknownDevice where not in the inventory, which is then
  // loaded again if kInventoryRetry has passed), and, where every ordinal is placed, the job's
  // devices are set to them.
  void on_uuids(Connection& c, const protocol::DeviceUuids& u, Clock::time_point now);
  const GpuInventory& inventory() const { return inventory_; }

 private:
  Registry& registry_;
  DeviceHooks hooks_;
  GpuInventory inventory_;  // by UUID
  Clock::time_point loaded_{};
};

}  // namespace gpushare::daemon
