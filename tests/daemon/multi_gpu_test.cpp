// Several GPUs: the fake driver with two simulated devices, a daemon whose inventory is the fake
// NVML's, and probes that see the devices through CUDA_VISIBLE_DEVICES in its index and UUID
// forms. A job is accounted on the physical device its driver uses, whatever its ordinals are.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "fake_device_view.h"
#include "harness.h"
#include "metrics_http.h"
#include "simulated_uuid.h"

namespace gpushare::testing {
namespace {

using fake::device_uuid_text;
using nlohmann::json;

constexpr uint64_t kMiB = 1ull << 20;

// Two fake devices of 4 GiB (3 GiB of capacity each, less the default 1 GiB reserve) shared by the
// daemon (its NVML) and every probe.
struct TwoGpus {
  explicit TwoGpus(json config = json::object(), bool inventory = true) : daemon(dir, config) {
    if (inventory) daemon.extra_env = fake_env();
  }
  std::map<std::string, std::string> fake_env() const {
    return {{"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
            {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"},
            {"GPUSHARE_FAKE_DEVICES", "2"},
            {"GPUSHARE_FAKE_MEMORY", "4G"}};
  }
  ChildProcess probe(const std::string& job, const std::string& visible) {
    ProbeOptions options = probe_as(job);
    options.extra_env = fake_env();
    if (!visible.empty()) options.extra_env["CUDA_VISIBLE_DEVICES"] = visible;
    return start_probe(dir, daemon.socket, options);
  }
  std::optional<json> job(const ChildProcess& p) { return job_with_pid(daemon.socket, p.pid()); }
  // The job's memory by physical device, as the daemon counts it.
  std::map<int, uint64_t> memory_of(const ChildProcess& p) {
    std::map<int, uint64_t> by_device;
    if (auto j = job(p))
      for (const json& m : (*j)["memory"]) by_device[m["device"].get<int>()] = m["bytes"];
    return by_device;
  }

  TempDir dir;
  Daemon daemon;
};

// CUDA_VISIBLE_DEVICES=1 and =GPU-<uuid of device 1>: the process's ordinal 0 is physical device 1
// for the driver (the fake's memory lands there) and for the daemon (devices, memory).
TEST(MultiGpu, AJobSeeingOnlyDevice1IsAccountedOnDevice1ByIndexOrByUuid) {
  TwoGpus gpus;
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  ChildProcess by_index = gpus.probe("by-index", "1");
  ChildProcess by_uuid = gpus.probe("by-uuid", device_uuid_text(1));
  ASSERT_TRUE(by_index.running() && by_uuid.running());
  std::string answer = by_index.ask("alloc 3145728");
  ASSERT_EQ(answer.rfind("ok ", 0), 0u)
      << answer << gpus.daemon.log() << read_file(gpus.dir / "probe.stderr");
  ASSERT_EQ(by_uuid.ask("alloc 5242880").rfind("ok ", 0), 0u);

  fake::DeviceView view(gpus.dir / "fake-device");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view.bytes_of_pid(1, by_index.pid()), 3 * kMiB);
  EXPECT_EQ(view.bytes_of_pid(1, by_uuid.pid()), 5 * kMiB);
  EXPECT_EQ(view.used_bytes(0), 0u);

  for (ChildProcess* p : {&by_index, &by_uuid}) {
    auto j = gpus.job(*p);
    ASSERT_TRUE(j);
    EXPECT_EQ((*j)["devices"], json::array({1})) << j->dump();
  }
  EXPECT_EQ(gpus.memory_of(by_index), (std::map<int, uint64_t>{{1, 3 * kMiB}}));
  EXPECT_EQ(gpus.memory_of(by_uuid), (std::map<int, uint64_t>{{1, 5 * kMiB}}));
  EXPECT_TRUE(gpus.daemon.log_contains("devices=1 (by UUID)")) << gpus.daemon.log();

  // `status` lists both devices of the inventory with their UUIDs.
  CtlResult status = run_ctl(gpus.daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.json["devices"].size(), 2u) << status.out;
  EXPECT_EQ(status.json["devices"][0]["uuid"], device_uuid_text(0));
  EXPECT_EQ(status.json["devices"][1]["uuid"], device_uuid_text(1));
  EXPECT_EQ(status.json["devices"][1]["jobs"], 2);
}

// A process that sees both devices, in reverse order by UUID, and works on both: `jobs` shows
// both physical devices, and each allocation on the one its ordinal is.
TEST(MultiGpu, AJobUsingBothDevicesShowsBothWithItsMemoryOnEach) {
  TwoGpus gpus;
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  ChildProcess both = gpus.probe("both", device_uuid_text(1) + "," + device_uuid_text(0));
  ASSERT_TRUE(both.running());
  ASSERT_TRUE(eventually(
      [&] {
        auto j = gpus.job(both);
        return j && (*j)["devices"] == json::array({1, 0});
      },
      5s))
      << (gpus.job(both) ? gpus.job(both)->dump() : "no job");
  ASSERT_EQ(both.ask("alloc 1048576").rfind("ok ", 0), 0u);  // ordinal 0: physical 1
  ASSERT_EQ(both.ask("use-device 1"), "ok");
  ASSERT_EQ(both.ask("alloc 2097152").rfind("ok ", 0), 0u);  // ordinal 1: physical 0
  ASSERT_EQ(both.ask("launch 10 0"), "ok");

  EXPECT_EQ(gpus.memory_of(both), (std::map<int, uint64_t>{{0, 2 * kMiB}, {1, 1 * kMiB}}));
  fake::DeviceView view(gpus.dir / "fake-device");
  EXPECT_EQ(view.bytes_of_pid(0, both.pid()), 2 * kMiB);
  EXPECT_EQ(view.bytes_of_pid(1, both.pid()), 1 * kMiB);
  auto j = gpus.job(both);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["devices"], json::array({0, 1}));

  // The table's DEVICE column.
  CtlResult table = run_ctl(gpus.daemon.socket, {"jobs"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  std::string line;
  for (size_t at = 0, next; at < table.out.size(); at = next + 1) {
    next = table.out.find('\n', at);
    if (next == std::string::npos) next = table.out.size();
    std::string l = table.out.substr(at, next - at);
    if (l.find("both") != std::string::npos) line = l;
  }
  EXPECT_NE(line.find(" 0,1 "), std::string::npos) << table.out;
}

// Capacity is per device: device 0 full does not refuse an allocation on device 1, and device
// 1's own capacity still holds there.
TEST(MultiGpu, MemoryCapacityIsPerPhysicalDevice) {
  json config = {{"memory", {{"devices", {{"0", "64M"}, {"1", "256M"}}}}}};
  TwoGpus gpus(config);
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  ChildProcess on_0 = gpus.probe("on-0", device_uuid_text(0));
  ChildProcess on_1 = gpus.probe("on-1", device_uuid_text(1));
  ASSERT_TRUE(on_0.running() && on_1.running());

  EXPECT_EQ(on_0.ask("alloc 104857600"), "error cuMemAlloc");  // 100 MiB > 64 MiB
  EXPECT_EQ(on_1.ask("alloc 104857600").rfind("ok ", 0), 0u);  // fits device 1's 256 MiB
  EXPECT_EQ(on_1.ask("alloc 209715200"), "error cuMemAlloc");  // 300 MiB in all > 256 MiB
  EXPECT_EQ(on_0.ask("alloc 33554432").rfind("ok ", 0), 0u);   // 32 MiB fits device 0
  EXPECT_EQ(gpus.memory_of(on_0), (std::map<int, uint64_t>{{0, 32 * kMiB}}));
  EXPECT_EQ(gpus.memory_of(on_1), (std::map<int, uint64_t>{{1, 100 * kMiB}}));
}

// A daemon without an inventory (no NVML) cannot place a UUID: the job runs, is registered for
// any device, and its shim says so once.
TEST(MultiGpu, AnUnplacedUuidRunsPassThroughForAnyDeviceWithOneWarning) {
  TwoGpus gpus(json::object(), /*inventory=*/false);
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  ChildProcess job = gpus.probe("unplaced", device_uuid_text(1));
  ASSERT_TRUE(job.running());
  ASSERT_EQ(job.ask("alloc 1048576").rfind("ok ", 0), 0u);
  auto j = gpus.job(job);
  ASSERT_TRUE(j) << gpus.daemon.log() << read_file(gpus.dir / "probe.stderr");
  EXPECT_EQ((*j)["devices"], json::array({0}));  // any device: where the shim declared it
  std::string err = read_file(gpus.dir / "probe.stderr");
  EXPECT_NE(err.find("gpushared does not know device " + device_uuid_text(1)), std::string::npos)
      << err;
  EXPECT_EQ(err.find("does not know"), err.rfind("does not know")) << err;
  EXPECT_TRUE(gpus.daemon.log_contains("no GPU inventory")) << gpus.daemon.log();
}

// device_uuids is checked like every message: before a registration, or malformed, it drops the
// client; a well-formed one is answered with the physical index of each UUID.
TEST(MultiGpu, TheDaemonAnswersWellFormedDeviceUuidsAndDropsOthers) {
  TwoGpus gpus;
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  protocol::DeviceUuids asked{};
  asked.count = 2;
  for (int d = 0; d < 2; ++d) {
    protocol::DeviceUuid uuid = fake::device_uuid(1 - d);
    std::memcpy(asked.uuids[d], uuid.data(), uuid.size());
  }

  RawClient early;
  ASSERT_TRUE(early.connect(gpus.daemon.socket));
  ASSERT_TRUE(early.send_frame(protocol::MessageType::device_uuids, &asked, sizeof asked));
  EXPECT_TRUE(early.closed_by_daemon(2s));

  RawClient client;
  int memfd = -1;
  ASSERT_TRUE(client.connect(gpus.daemon.socket));
  ASSERT_TRUE(client.register_job("raw", protocol::JobClass::opportunistic, 1, &memfd));
  ASSERT_TRUE(client.send_frame(protocol::MessageType::device_uuids, &asked, sizeof asked));
  auto frame = client.receive(2s);
  ASSERT_TRUE(frame);
  ASSERT_EQ(frame->size(), sizeof(protocol::FrameHeader) + sizeof(protocol::DeviceMap));
  protocol::DeviceMap map;
  std::memcpy(&map, frame->data() + sizeof(protocol::FrameHeader), sizeof map);
  EXPECT_EQ(map.count, 2u);
  EXPECT_EQ(map.physical[0], 1);
  EXPECT_EQ(map.physical[1], 0);

  asked.reserved = 1;
  ASSERT_TRUE(client.send_frame(protocol::MessageType::device_uuids, &asked, sizeof asked));
  EXPECT_TRUE(client.closed_by_daemon(2s));
  if (memfd >= 0) ::close(memfd);
}

// `gpusharectl status` and /metrics list the same devices: here both GPUs of the inventory, with
// no job and no policy chosen for either (/metrics once listed only the devices with a policy,
// memory, a scheduler tick or a job, and `status` not the scheduler's).
TEST(MultiGpu, StatusAndMetricsListTheSameDevices) {
  TempDir metrics_dir;
  const std::string metrics = metrics_dir / "metrics.sock";
  TwoGpus gpus(json{{"metrics", {{"listen", metrics}}}});
  ASSERT_TRUE(gpus.daemon.start()) << gpus.daemon.log();
  ASSERT_TRUE(gpus.daemon.wait_for_log("metrics: serving /metrics on " + metrics))
      << gpus.daemon.log();
  // The inventory is read from NVML shortly after start.
  std::set<int> in_status;
  ASSERT_TRUE(eventually(
      [&] {
        CtlResult status = run_ctl(gpus.daemon.socket, {"status", "-o", "json"});
        in_status.clear();
        if (status.exit_code == 0 && status.json.contains("devices"))
          for (const json& d : status.json["devices"]) in_status.insert(d["device"].get<int>());
        return in_status.size() >= 2;
      },
      5s));
  EXPECT_EQ(in_status, (std::set<int>{0, 1}));
  std::string text;
  std::set<int> in_metrics;
  EXPECT_TRUE(eventually(
      [&] {
        text = http_get_unix(metrics, "/metrics").value_or("");
        in_metrics.clear();
        for (int d : {0, 1, 2})
          if (text.find("gpushare_device_policy_info{device=\"" + std::to_string(d) + "\"") !=
              std::string::npos)
            in_metrics.insert(d);
        return in_metrics == in_status;
      },
      5s))
      << text;
}

}  // namespace
}  // namespace gpushare::testing
