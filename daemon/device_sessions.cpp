#include "device_sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "logging.h"

namespace gpushare::daemon {
namespace {

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

void DeviceSessions::load(Clock::time_point now) {
  std::string why;
  inventory_ = hooks_.load(&why);
  loaded_ = now;
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

void DeviceSessions::on_uuids(Connection& c, const protocol::DeviceUuids& u,
                              Clock::time_point now) {
  Job* job = registry_.find(c.job_id);
  if (!job) return hooks_.drop(c.fd, "sent device UUIDs without a job");
  if (std::string problem = check_device_uuids(u); !problem.empty())
    return hooks_.drop(c.fd, "bad device_uuids: " + problem);
  protocol::DeviceMap map = place_devices(inventory_, u);
  if (!all_placed(map) && now - loaded_ >= kInventoryRetry) {
    load(now);
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
    hooks_.warn("uid=" + std::to_string(c.peer.uid) + " devices",
                "devices pid=" + std::to_string(c.peer.pid) + " job=" + log_text(job->name) +
                    ": device " + uuid_text(u.uuids[first]) + " (its CUDA ordinal " +
                    std::to_string(first) +
                    ") is not in the inventory: its devices stay as registered");
  }
  hooks_.reply(c, protocol::MessageType::device_map, &map, sizeof map);
}

}  // namespace gpushare::daemon
