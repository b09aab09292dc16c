// The plugin against a fake kubelet: register, list, prefer, allocate, a kubelet restart and the
// registration that follows it, the PodResources map, and what the plugin does with a kubelet
// that misbehaves or flags that are wrong.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fake_kubelet.h"
#include "gpushare/protocol/pod_allocation.h"
#include "plugin_process.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

const std::string kProduction = "gpushare.io/production";
const std::string kOpportunistic = "gpushare.io/opportunistic";

std::vector<std::string> ids_of(const v1beta1::ListAndWatchResponse& list) {
  std::vector<std::string> ids;
  for (const auto& d : list.devices()) {
    EXPECT_EQ(d.health(), "Healthy");
    ids.push_back(d.id());
  }
  return ids;
}

grpc::Status allocate(v1beta1::DevicePlugin::Stub& plugin, const std::vector<std::string>& ids,
                      v1beta1::AllocateResponse* reply) {
  v1beta1::AllocateRequest request;
  auto* c = request.add_container_requests();
  for (const auto& id : ids) c->add_devices_ids(id);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return plugin.Allocate(&context, request, reply);
}

json read_map(const PluginSetup& setup) {
  return json::parse(read_file(setup.map_path()), nullptr, false);
}

TEST(DevicePlugin, RegistersListsAllocatesAndRegistersAgainAfterAKubeletRestart) {
  TempDir dir;
  PluginSetup setup(dir);
  FakeKubelet kubelet(setup.device_plugin_dir);
  FakePodResources pods(setup.pod_resources_socket);
  kubelet.refuse_next(1);  // a kubelet still starting: the plugin retries
  kubelet.start();
  ChildProcess plugin = setup.start();
  ASSERT_TRUE(kubelet.wait_for_registrations(2, 20s)) << read_file(setup.log);

  auto registered = kubelet.registrations();
  std::set<std::string> resources, endpoints;
  for (const auto& r : registered) {
    EXPECT_EQ(r.version(), "v1beta1");
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
    resources.insert(r.resource_name());
    endpoints.insert(r.endpoint());
  }
  EXPECT_EQ(resources, (std::set<std::string>{kProduction, kOpportunistic}));
  EXPECT_EQ(endpoints.size(), 2u);  // each resource on its own socket

  auto production = kubelet.plugin(kProduction);
  auto opportunistic = kubelet.plugin(kOpportunistic);
  {
    grpc::ClientContext context;
    v1beta1::DevicePluginOptions options;
    ASSERT_TRUE(production->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok());
    EXPECT_TRUE(options.get_preferred_allocation_available());
    EXPECT_FALSE(options.pre_start_required());
    // Not required, but a kubelet may call it anyway.
    grpc::ClientContext pre_start;
    v1beta1::PreStartContainerRequest request;
    request.add_devices_ids(setup.gpus[0] + "-s0");
    v1beta1::PreStartContainerResponse started;
    EXPECT_TRUE(production->PreStartContainer(&pre_start, request, &started).ok());
  }
  const std::string& a = setup.gpus[0];
  const std::string& b = setup.gpus[1];
  auto listed = first_list(*production, 10s);
  ASSERT_TRUE(listed);
  EXPECT_EQ(ids_of(*listed),
            (std::vector<std::string>{a + "-s0", a + "-s1", b + "-s0", b + "-s1"}));
  listed = first_list(*opportunistic, 10s);
  ASSERT_TRUE(listed);
  EXPECT_EQ(ids_of(*listed).size(), 6u);

  // Two shares for one container: both on the GPU with more free shares.
  {
    v1beta1::PreferredAllocationRequest request;
    auto* c = request.add_container_requests();
    for (const auto& id : {a + "-s2", b + "-s0", b + "-s1", b + "-s2"})
      c->add_available_deviceids(id);
    c->set_allocation_size(2);
    v1beta1::PreferredAllocationResponse reply;
    grpc::ClientContext context;
    ASSERT_TRUE(opportunistic->GetPreferredAllocation(&context, request, &reply).ok());
    ASSERT_EQ(reply.container_responses_size(), 1);
    EXPECT_EQ(reply.container_responses(0).deviceids(0), b + "-s0");
    EXPECT_EQ(reply.container_responses(0).deviceids(1), b + "-s1");
  }

  v1beta1::AllocateResponse reply;
  ASSERT_TRUE(allocate(*production, {b + "-s1"}, &reply).ok());
  ASSERT_EQ(reply.container_responses_size(), 1);
  const auto& envs = reply.container_responses(0).envs();
  EXPECT_EQ(envs.at("LD_PRELOAD"), Artefacts::shim());
  EXPECT_EQ(envs.at("GPUSHARE_PRIORITY"), "production");
  EXPECT_EQ(envs.at("GPUSHARE_SOCKET"), setup.socket_dir + "/gpushared.sock");
  EXPECT_EQ(envs.at("NVIDIA_VISIBLE_DEVICES"), b);
  EXPECT_EQ(envs.at("CUDA_VISIBLE_DEVICES"), b);
  std::string token_path;
  for (const auto& m : reply.container_responses(0).mounts()) {
    EXPECT_TRUE(m.read_only()) << m.container_path();
    if (m.container_path() == protocol::kAllocationTokenPath) token_path = m.host_path();
  }
  ASSERT_EQ(token_path.rfind(setup.state_dir + "/tokens/", 0), 0u) << token_path;
  EXPECT_TRUE(std::filesystem::is_regular_file(token_path));
  std::string token = std::filesystem::path(token_path).filename();

  // The map lists the allocation at once; its pod once PodResources shows it.
  json map = read_map(setup);
  ASSERT_EQ(map["allocations"].size(), 1u) << map.dump();
  EXPECT_EQ(map["allocations"][0]["token"], token);
  EXPECT_EQ(map["allocations"][0]["resource"], kProduction);
  pods.add("serving", "inference-0", "server", kProduction, {b + "-s1"});
  EXPECT_TRUE(eventually([&] { return read_map(setup)["allocations"][0].contains("pod"); }, 20s))
      << read_file(setup.log);
  map = read_map(setup);
  EXPECT_EQ(map["allocations"][0]["namespace"], "serving");
  EXPECT_EQ(map["allocations"][0]["pod"], "inference-0");
  EXPECT_EQ(map["allocations"][0]["container"], "server");

  // A kubelet that asks for shares the plugin never advertised gets an error, not a crash.
  v1beta1::AllocateResponse refused;
  grpc::Status status = allocate(*production, {"GPU-nope-s0"}, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("GPU-nope-s0"), std::string::npos);
  status = allocate(*opportunistic, {a + "-s7"}, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // The kubelet restarts: it removes every socket, then serves a new kubelet.sock.
  kubelet.stop_and_clear();
  kubelet.start();
  ASSERT_TRUE(kubelet.wait_for_registrations(4, 20s)) << read_file(setup.log);
  for (const auto& resource : {kProduction, kOpportunistic}) {
    auto again = kubelet.plugin(resource);
    ASSERT_TRUE(first_list(*again, 10s)) << resource;
  }
  EXPECT_TRUE(plugin.running());
  // Allocations survive the restart.
  EXPECT_EQ(read_map(setup)["allocations"][0]["token"], token);

  plugin.signal(SIGTERM);
  int exit_status = plugin.wait(10s);
  EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << read_file(setup.log);
}

TEST(DevicePlugin, AnAllocationNoContainerHoldsEndsAfterTheGrace) {
  TempDir dir;
  PluginSetup setup(dir);
  setup.extra_args = {"--token-grace-s", "1"};
  FakeKubelet kubelet(setup.device_plugin_dir);
  FakePodResources pods(setup.pod_resources_socket);
  kubelet.start();
  ChildProcess plugin = setup.start();
  ASSERT_TRUE(kubelet.wait_for_registrations(2, 20s)) << read_file(setup.log);
  auto production = kubelet.plugin(kProduction);
  v1beta1::AllocateResponse held, unheld;
  ASSERT_TRUE(allocate(*production, {setup.gpus[0] + "-s0"}, &held).ok());
  ASSERT_TRUE(allocate(*production, {setup.gpus[0] + "-s1"}, &unheld).ok());
  pods.add("serving", "kept", "server", kProduction, {setup.gpus[0] + "-s0"});
  EXPECT_TRUE(eventually([&] { return read_map(setup)["allocations"].size() == 1; }, 20s))
      << read_file(setup.map_path());
  EXPECT_EQ(read_map(setup)["allocations"][0]["pod"], "kept");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(setup.state_dir + "/tokens"),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(DevicePlugin, ARestartedPluginKeepsTheAllocationsItMade) {
  TempDir dir;
  PluginSetup setup(dir);
  FakeKubelet kubelet(setup.device_plugin_dir);
  FakePodResources pods(setup.pod_resources_socket);
  kubelet.start();
  ChildProcess plugin = setup.start();
  ASSERT_TRUE(kubelet.wait_for_registrations(2, 20s)) << read_file(setup.log);
  v1beta1::AllocateResponse reply;
  ASSERT_TRUE(allocate(*kubelet.plugin(kOpportunistic), {setup.gpus[1] + "-s2"}, &reply).ok());
  std::string token = read_map(setup)["allocations"][0]["token"];
  plugin.signal(SIGKILL);  // no chance to clean up
  plugin.wait();
  // The kubelet mounts the same token into a restarted container: it must still be there.
  ChildProcess again = setup.start();
  ASSERT_TRUE(kubelet.wait_for_registrations(4, 20s)) << read_file(setup.log);
  json map = read_map(setup);
  ASSERT_EQ(map["allocations"].size(), 1u) << map.dump();
  EXPECT_EQ(map["allocations"][0]["token"], token);
  EXPECT_EQ(map["allocations"][0]["resource"], kOpportunistic);
  EXPECT_TRUE(std::filesystem::exists(setup.state_dir + "/tokens/" + token));
}

TEST(DevicePlugin, WaitsForAKubeletThatIsNotThereAndForPodResourcesThatDoNotAnswer) {
  TempDir dir;
  PluginSetup setup(dir);
  std::filesystem::create_directories(setup.device_plugin_dir);
  ChildProcess plugin = setup.start();
  // No kubelet and no PodResources: the plugin waits and says so; the map exists, empty.
  EXPECT_TRUE(eventually([&] { return read_map(setup).contains("allocations"); }, 20s));
  EXPECT_TRUE(eventually(
      [&] { return read_file(setup.log).find("waiting for the kubelet") != std::string::npos; },
      20s));
  EXPECT_TRUE(eventually(
      [&] { return read_file(setup.log).find("cannot list PodResources") != std::string::npos; },
      20s));
  FakeKubelet kubelet(setup.device_plugin_dir);
  kubelet.start();
  EXPECT_TRUE(kubelet.wait_for_registrations(2, 20s)) << read_file(setup.log);
  EXPECT_TRUE(plugin.running());
}

TEST(DevicePlugin, BadFlagsAreOneLineEachAndNoStart) {
  TempDir dir;
  ChildProcess plugin = ChildProcess::start(
      {plugin_path(), "--state-dir", "relative", "--gpus", "0,0", "--resource-prefix", "UPPER"},
      {{"PATH", "/usr/bin:/bin"}}, dir / "err");
  int status = plugin.wait(10s);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::string err = read_file(dir / "err");
  EXPECT_NE(err.find("--state-dir: expected an absolute path"), std::string::npos) << err;
  EXPECT_NE(err.find("--gpus: '0' is given twice"), std::string::npos) << err;
  EXPECT_NE(err.find("--resource-prefix"), std::string::npos) << err;

  // No GPU to discover: a clear error, not an empty resource.
  ChildProcess none = ChildProcess::start(
      {plugin_path(), "--gpu-info-dir", dir / "no-such-dir", "--state-dir", dir / "state"},
      {{"PATH", "/usr/bin:/bin"}}, dir / "none");
  status = none.wait(10s);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_file(dir / "none").find("no GPU found"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::testing
