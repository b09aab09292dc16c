// Class by allocation, end to end without a cluster: the real plugin answers a fake kubelet's
// Allocate; the answer's environment and mounts are applied to a probe (real shim, fake driver)
// the way a container runtime would, with the daemon's fake /proc (--proc-root) standing in for
// the container: its cgroup names the pod, and its root holds the token file at the mount's
// container path (a hard link: the same inode, as a bind mount keeps). The real gpushared then
// grants the class by what was allocated, and nothing the container sets raises it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fake_kubelet.h"
#include "gpushare/protocol/pod_allocation.h"
#include "plugin_process.h"
#include "shim_preload.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kProduction = "gpushare.io/production";
const std::string kOpportunistic = "gpushare.io/opportunistic";

struct Allocated {
  std::map<std::string, std::string> envs;
  std::string token_host_path;
};

Allocated allocate(FakeKubelet& kubelet, const std::string& resource, const std::string& id) {
  auto plugin = kubelet.plugin(resource);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(id);
  v1beta1::AllocateResponse reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Allocated a;
  grpc::Status status = plugin->Allocate(&context, request, &reply);
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (!status.ok() || reply.container_responses_size() != 1) return a;
  for (const auto& [k, v] : reply.container_responses(0).envs()) a.envs[k] = v;
  for (const auto& m : reply.container_responses(0).mounts()) {
    // The library and the socket folder are mounted at their host paths: on this host the
    // environment works as it is.
    if (m.container_path() == protocol::kAllocationTokenPath)
      a.token_host_path = m.host_path();
    else
      EXPECT_EQ(m.container_path(), m.host_path());
  }
  return a;
}

std::string pod_cgroup(std::string uid, char id) {
  std::replace(uid.begin(), uid.end(), '-', '_');
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid +
         ".slice/cri-containerd-" + std::string(64, id) + ".scope\n";
}

// A container's process: started with the allocation's environment (plus `overrides`, what the
// container's own spec or code sets); before its shim registers, the fake /proc gets its cgroup
// and, when `token` is set, its root gets the token at kAllocationTokenPath.
ChildProcess start_container(const TempDir& dir, const std::string& proc_root,
                             const std::map<std::string, std::string>& envs,
                             const std::string& cgroup, const std::string& token,
                             const std::string& job,
                             const std::map<std::string, std::string>& overrides = {}) {
  std::map<std::string, std::string> env = envs;
  env["PATH"] = "/usr/bin:/bin";
  env["LD_LIBRARY_PATH"] = Artefacts::fake_driver_dir();  // the node's driver, as the runtime gives
  env["GPUSHARE_FAKE_DEVICE_FILE"] = dir / "fake-device";
  env["GPUSHARE_FAKE_DEVICES"] = "2";  // the node's two GPUs (PluginSetup::gpus)
  env["GPUSHARE_JOB"] = job;
  env["LD_PRELOAD"] = shim_preload(env["LD_PRELOAD"]);
  for (const auto& [k, v] : overrides) env[k] = v;
  ChildProcess probe = ChildProcess::start({Artefacts::probe()}, env, dir / (job + ".stderr"));
  auto ready = probe.read_line(20s);
  if (!ready || ready->rfind("ready", 0) != 0) return ChildProcess();
  std::string pid_dir = proc_root + "/" + std::to_string(probe.pid());
  fs::create_directories(pid_dir + "/root/etc/gpushare");
  std::ofstream(pid_dir + "/cgroup") << cgroup;
  if (!token.empty())
    fs::create_hard_link(token, pid_dir + "/root" + protocol::kAllocationTokenPath);
  if (probe.ask("init", 20s) != "ok") return ChildProcess();
  return probe;
}

struct Node {
  explicit Node(json production_rules)
      : setup(dir),
        kubelet(setup.device_plugin_dir),
        pods(setup.pod_resources_socket),
        daemon(dir, {{"production", std::move(production_rules)},
                     {"kubernetes", {{"allocations", setup.map_path()}}}}) {
    fs::create_directories(proc_root);
    kubelet.start();
    plugin = setup.start();
    daemon.extra_args = {"--proc-root", proc_root};
  }
  bool start() { return kubelet.wait_for_registrations(2, 20s) && daemon.start(); }
  TempDir dir;
  PluginSetup setup;
  FakeKubelet kubelet;
  FakePodResources pods;
  Daemon daemon;
  std::string proc_root = dir / "proc";
  ChildProcess plugin;
};

const std::string kServePod = "1a2b3c4d-5e6f-4789-abcd-ef0123456789";
const std::string kTrainPod = "99999999-5e6f-4789-abcd-ef0123456789";

TEST(AllocationClass, AProductionShareGrantsProductionAndAnOpportunisticOneNeverDoes) {
  Node node(json::array({{{"resource", kProduction}}}));
  ASSERT_TRUE(node.start()) << read_file(node.setup.log) << node.daemon.log();
  Allocated serve = allocate(node.kubelet, kProduction, node.setup.gpus[0] + "-s0");
  Allocated train = allocate(node.kubelet, kOpportunistic, node.setup.gpus[0] + "-s0");
  ASSERT_FALSE(serve.token_host_path.empty());
  ASSERT_FALSE(train.token_host_path.empty());
  EXPECT_EQ(serve.envs["GPUSHARE_SOCKET"], node.daemon.socket);

  ChildProcess s = start_container(node.dir, node.proc_root, serve.envs, pod_cgroup(kServePod, 'a'),
                                   serve.token_host_path, "serve");
  // The opportunistic container asks for production in its own spec.
  ChildProcess t =
      start_container(node.dir, node.proc_root, train.envs, pod_cgroup(kTrainPod, 'b'),
                      train.token_host_path, "train", {{"GPUSHARE_PRIORITY", "production"}});
  ASSERT_TRUE(s.running() && t.running()) << node.daemon.log();

  auto sj = job_with_pid(node.daemon.socket, s.pid());
  ASSERT_TRUE(sj) << list_jobs(node.daemon.socket).dump();
  EXPECT_EQ((*sj)["class"], "production");
  EXPECT_EQ((*sj)["resource"], kProduction);
  EXPECT_EQ((*sj)["pod_uid"], kServePod);
  auto tj = job_with_pid(node.daemon.socket, t.pid());
  ASSERT_TRUE(tj);
  EXPECT_EQ((*tj)["class"], "opportunistic");
  EXPECT_EQ((*tj)["requested_class"], "production");
  EXPECT_EQ((*tj)["resource"], kOpportunistic);
  EXPECT_TRUE(node.daemon.log_contains("resource=" + kProduction + " class=production"))
      << node.daemon.log();
}

TEST(AllocationClass, NamespaceRulesUseWhatPodResourcesSays) {
  Node node(json::array({{{"namespace", "serving"}, {"pod", "inference-*"}}}));
  ASSERT_TRUE(node.start()) << read_file(node.setup.log) << node.daemon.log();
  // Both containers got opportunistic shares and ask for production; only the pod the rule
  // names (by namespace and name, from PodResources) gets it.
  std::string in_serving = node.setup.gpus[1] + "-s0";
  std::string in_batch = node.setup.gpus[1] + "-s1";
  Allocated serve = allocate(node.kubelet, kOpportunistic, in_serving);
  Allocated other = allocate(node.kubelet, kOpportunistic, in_batch);
  node.pods.add("serving", "inference-0", "server", kOpportunistic, {in_serving});
  node.pods.add("batch", "inference-0", "server", kOpportunistic, {in_batch});
  ASSERT_TRUE(eventually(
      [&] {
        json map = json::parse(read_file(node.setup.map_path()), nullptr, false);
        return map.is_object() && map["allocations"].size() == 2 &&
               map["allocations"][0].contains("pod") && map["allocations"][1].contains("pod");
      },
      20s))
      << read_file(node.setup.map_path());

  std::map<std::string, std::string> ask = {{"GPUSHARE_PRIORITY", "production"}};
  ChildProcess s = start_container(node.dir, node.proc_root, serve.envs, pod_cgroup(kServePod, 'a'),
                                   serve.token_host_path, "s", ask);
  ChildProcess o = start_container(node.dir, node.proc_root, other.envs, pod_cgroup(kTrainPod, 'b'),
                                   other.token_host_path, "o", ask);
  ASSERT_TRUE(s.running() && o.running()) << node.daemon.log();
  auto sj = job_with_pid(node.daemon.socket, s.pid());
  ASSERT_TRUE(sj);
  EXPECT_EQ((*sj)["class"], "production");
  EXPECT_EQ((*sj)["pod_namespace"], "serving");
  EXPECT_EQ((*sj)["pod_name"], "inference-0");
  auto oj = job_with_pid(node.daemon.socket, o.pid());
  ASSERT_TRUE(oj);
  EXPECT_EQ((*oj)["class"], "opportunistic");
  EXPECT_EQ((*oj)["pod_namespace"], "batch");
}

TEST(AllocationClass, ABadMapGrantsNothingAndSaysWhy) {
  Node node(json::array({{{"resource", kProduction}}}));
  ASSERT_TRUE(node.start()) << read_file(node.setup.log) << node.daemon.log();
  Allocated serve = allocate(node.kubelet, kProduction, node.setup.gpus[0] + "-s1");
  node.plugin.signal(SIGKILL);  // it would rewrite the map
  node.plugin.wait();
  json map = json::parse(read_file(node.setup.map_path()));
  map["allocations"][0]["granted"] = "production";  // a field the daemon does not know
  std::ofstream(node.setup.map_path()) << map.dump();
  ChildProcess s = start_container(node.dir, node.proc_root, serve.envs, pod_cgroup(kServePod, 'a'),
                                   serve.token_host_path, "serve");
  ASSERT_TRUE(s.running());
  auto sj = job_with_pid(node.daemon.socket, s.pid());
  ASSERT_TRUE(sj);
  EXPECT_EQ((*sj)["class"], "opportunistic");
  EXPECT_TRUE((*sj)["resource"].is_null());
  EXPECT_TRUE(node.daemon.wait_for_log("no allocation: " + node.setup.map_path() +
                                       ": allocations[0]: unknown field \"granted\""))
      << node.daemon.log();
}

}  // namespace
}  // namespace gpushare::testing
