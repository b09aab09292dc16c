// The shim's device_uuids: which physical device each of the job's CUDA ordinals is, found by
// UUID in the machine's inventory (gpu_inventory.h, docs/protocol.md "Devices"). The answer sets
// the job's devices, so it is accounted, scheduled and swapped on the right ones.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "logging.h"
#include "server.h"

namespace gpushare::daemon {
namespace {

// NVML is asked again for a UUID it did not know (a GPU that appeared after the daemon started, a
// driver that was not loaded yet) at most this often: it blocks the event loop while it runs.
constexpr auto kInventoryRetry = std::chrono::seconds(30);

std::string uuid_text(const uint8_t (&bytes)[protocol::kDeviceUuidSize]) {
  protocol::DeviceUuid uuid;
  std::memcpy(uuid.data(), bytes, uuid.size());
  char text[protocol::kDeviceUuidTextSize];
  protocol::format_device_uuid(uuid, text);
  return text;
}

bool all_placed(const protocol::DeviceMap& map) {
  return std::none_of(map.physical, map.physical + map.count,
                      [](int32_t d) { return d == protocol::kUnknownDevice; });
}

}  // namespace

void Server::load_inventory(Clock::time_point now) {
  std::string why;
  inventory_ = GpuInventory::from_nvml(&why);
  inventory_loaded_ = now;
  if (inventory_.index_of.empty()) {
    spdlog::info(
        "no GPU inventory ({}): jobs' devices are as their CUDA_VISIBLE_DEVICES lists "
        "them",
        why.empty() ? "NVML lists no device" : why);
    return;
  }
  std::string list;
  for (const auto& [uuid, index] : inventory_.index_of) {
    char text[protocol::kDeviceUuidTextSize];
    protocol::format_device_uuid(uuid, text);
    list += (list.empty() ? "" : ", ") + std::to_string(index) + ": " + text;
  }
  spdlog::info("devices by NVML: {}", list);
}

void Server::on_device_uuids(Connection& c, const protocol::DeviceUuids& u) {
  Job* job = registry_.find(c.job_id);
  if (!job) return drop(c.fd, "sent device UUIDs without a job");
  if (std::string problem = check_device_uuids(u); !problem.empty())
    return drop(c.fd, "bad device_uuids: " + problem);
  const Clock::time_point now = Clock::now();
  protocol::DeviceMap map = place_devices(inventory_, u);
  if (!all_placed(map) && now - inventory_loaded_ >= kInventoryRetry) {
    load_inventory(now);
    map = place_devices(inventory_, u);
  }
  if (all_placed(map)) {
    std::vector<int> devices;
    for (uint32_t i = 0; i < map.count; ++i)
      if (std::find(devices.begin(), devices.end(), map.physical[i]) == devices.end())
        devices.push_back(map.physical[i]);
    if (devices != job->devices) {
      std::string list;
      for (int d : devices) list += (list.empty() ? "" : ",") + std::to_string(d);
      spdlog::info("devices pid={} job={} id={} devices={} (by UUID)", job->peer.pid,
                   log_text(job->name), job->id, list);
      job->devices = std::move(devices);
    }
  } else {
    uint32_t first = 0;
    while (map.physical[first] != protocol::kUnknownDevice) ++first;
    warn_limited("uid=" + std::to_string(c.peer.uid) + " devices",
                 "devices pid=" + std::to_string(c.peer.pid) + " job=" + log_text(job->name) +
                     ": device " + uuid_text(u.uuids[first]) + " (its CUDA ordinal " +
                     std::to_string(first) +
                     ") is not in the inventory: its devices stay as registered");
  }
  reply(c, protocol::MessageType::device_map, &map, sizeof map);
}

std::set<int> Server::known_devices() {
  std::set<int> devices = policies_.devices();
  for (const auto& [device, bytes] : memory_.broker().physical) devices.insert(device);
  for (const auto& [uuid, device] : inventory_.index_of) devices.insert(device);
  for (const auto& [device, status] : scheduler_.device_status()) devices.insert(device);
  for (auto& [id, job] : registry_.jobs())
    for (int d : Scheduler::devices_of(job)) devices.insert(d);
  return devices;
}

}  // namespace gpushare::daemon
