// The device sessions alone (daemon/device_sessions.h): a shim's CUDA ordinals placed on the GPUs
// by UUID, over a registry built here and an inventory the test hands in for NVML's.
#include "device_sessions.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "device_uuids.h"
#include "registry_jobs.h"

namespace gpushare::daemon {
namespace {

using Clock = DeviceSessions::Clock;

struct Sessions {
  DeviceSessions make() {
    return DeviceSessions(
        registry,
        DeviceHooks{.load =
                        [this](std::string* why) {
                          ++loads;
                          *why = "stand-in";
                          return nvml;
                        },
                    .reply =
                        [this](Connection&, protocol::MessageType type, const void* payload,
                               size_t length) {
                          EXPECT_EQ(type, protocol::MessageType::device_map);
                          EXPECT_EQ(length, sizeof(protocol::DeviceMap));
                          std::memcpy(&map, payload, sizeof map);
                          ++replies;
                          return true;
                        },
                    .drop = [this](int, const std::string& why) { dropped.push_back(why); },
                    .warn = [this](const std::string&,
                                   const std::string& line) { warnings.push_back(line); }});
  }
  // A registered job on device 0 (as CUDA_VISIBLE_DEVICES said), and its connection.
  Connection registered() {
    Job job = job_with_block(registry, protocol::JobClass::opportunistic, {0});
    job.name = "train";
    job.peer.pid = 100;
    Connection c;
    c.fd = 7;
    c.peer = job.peer;
    c.role = Connection::Role::shim;
    c.job_id = registry.add(std::move(job)).id;
    return c;
  }

  Registry registry;
  GpuInventory nvml;  // what the load hook answers
  int loads = 0, replies = 0;
  protocol::DeviceMap map{};
  std::vector<std::string> dropped, warnings;
};

TEST(DeviceSessions, EachOrdinalIsPlacedByUuidAndSetsTheJobsDevices) {
  Sessions s;
  s.nvml.index_of = {{uuid_of(10), 0}, {uuid_of(50), 1}, {uuid_of(90), 2}};
  DeviceSessions devices = s.make();
  const Clock::time_point start = Clock::now();
  devices.load(start);
  EXPECT_EQ(devices.inventory().index_of.size(), 3u);
  Connection c = s.registered();
  // Its ordinals 0 and 1 are the machine's GPUs 2 and 1 (a container's own numbering).
  devices.on_uuids(c, asking({uuid_of(90), uuid_of(50)}), start);
  ASSERT_EQ(s.replies, 1);
  EXPECT_EQ(s.map.count, 2u);
  EXPECT_EQ(s.map.physical[0], 2);
  EXPECT_EQ(s.map.physical[1], 1);
  EXPECT_EQ(s.registry.find(c.job_id)->devices, (std::vector<int>{2, 1}));
  EXPECT_TRUE(s.dropped.empty());
  EXPECT_TRUE(s.warnings.empty());
}

// A UUID NVML did not list: NVML is asked again, at most every kInventoryRetry; until it knows the
// GPU the job keeps the devices it registered with, and a warning names the ordinal.
TEST(DeviceSessions, AnUnknownGpuIsLookedForAgainAtMostEveryRetryPeriod) {
  Sessions s;
  s.nvml.index_of = {{uuid_of(10), 0}};
  DeviceSessions devices = s.make();
  const Clock::time_point start = Clock::now();
  devices.load(start);
  Connection c = s.registered();
  devices.on_uuids(c, asking({uuid_of(10), uuid_of(70)}), start + std::chrono::seconds(1));
  EXPECT_EQ(s.loads, 1);  // too soon to ask NVML again
  EXPECT_EQ(s.map.physical[1], protocol::kUnknownDevice);
  EXPECT_EQ(s.registry.find(c.job_id)->devices, (std::vector<int>{0}));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("(its CUDA ordinal 1) is not in the inventory"), std::string::npos)
      << s.warnings[0];

  s.nvml.index_of[uuid_of(70)] = 3;  // the GPU appears (its driver was loaded late)
  devices.on_uuids(c, asking({uuid_of(10), uuid_of(70)}), start + kInventoryRetry);
  EXPECT_EQ(s.loads, 2);
  EXPECT_EQ(s.map.physical[1], 3);
  EXPECT_EQ(s.registry.find(c.job_id)->devices, (std::vector<int>{0, 3}));
}

TEST(DeviceSessions, AMalformedOrUnregisteredQuestionIsDroppedWithWhy) {
  Sessions s;
  DeviceSessions devices = s.make();
  Connection stranger;
  stranger.fd = 9;
  devices.on_uuids(stranger, asking({uuid_of(1)}), Clock::now());
  Connection c = s.registered();
  protocol::DeviceUuids bad = asking({uuid_of(1)});
  bad.count = protocol::kMaxDevices + 1;
  devices.on_uuids(c, bad, Clock::now());
  ASSERT_EQ(s.dropped.size(), 2u);
  EXPECT_EQ(s.dropped[0], "sent device UUIDs without a job");
  EXPECT_EQ(s.dropped[1].rfind("bad device_uuids: ", 0), 0u) << s.dropped[1];
  EXPECT_EQ(s.replies, 0);
}

}  // namespace
}  // namespace gpushare::daemon
