// Pods end to end without a cluster: the daemon runs with --proc-root pointing at a fake /proc
// whose <pid>/cgroup puts a probe (real shim, fake driver) in a kubepods cgroup, as the kubelet
// would; production rules by pod then decide its class, and nothing the client sets can.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "gpushare/protocol/pod_allocation.h"
#include "harness.h"
#include "shim_preload.h"

namespace gpushare::testing {
namespace {

using nlohmann::json;

const std::string kServeUid = "1a2b3c4d-5e6f-4789-abcd-ef0123456789";
const std::string kTrainUid = "99999999-5e6f-4789-abcd-ef0123456789";
const std::string kServeId(64, 'a');
const std::string kTrainId(64, 'b');

std::string systemd_cgroup(std::string uid, const std::string& qos, const std::string& id) {
  std::replace(uid.begin(), uid.end(), '-', '_');
  std::string qos_slice = qos.empty() ? "" : "kubepods-" + qos + ".slice/";
  std::string pod_slice = "kubepods-" + (qos.empty() ? "" : qos + "-") + "pod" + uid + ".slice";
  return "0::/kubepods.slice/" + qos_slice + pod_slice + "/cri-containerd-" + id + ".scope\n";
}

// A fake /proc for the daemon: <root>/<pid>/cgroup.
struct FakeProc {
  explicit FakeProc(const TempDir& dir) : root(dir / "proc") {
    std::filesystem::create_directories(root);
  }
  void place(pid_t pid, const std::string& cgroup_text) const {
    std::filesystem::create_directories(root + "/" + std::to_string(pid));
    std::ofstream(root + "/" + std::to_string(pid) + "/cgroup") << cgroup_text;
  }
  std::string root;
};

// A probe whose cgroup is written into the fake /proc after it starts and before its shim
// registers (on "init"). `cgroup_text` empty: no file (a host process the fake /proc lacks).
ChildProcess start_probe_in(const TempDir& dir, const Daemon& daemon, const FakeProc& proc,
                            const std::string& cgroup_text, const std::string& job,
                            const std::string& priority,
                            const std::map<std::string, std::string>& extra_env = {},
                            const std::function<void(pid_t)>& before_init = {}) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin:/bin"},
      {"LD_PRELOAD", shim_preload(Artefacts::shim())},  // the sanitizer runtime first, if any
      {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
      {"GPUSHARE_SOCKET", daemon.socket},
      {"GPUSHARE_JOB", job},
      {"GPUSHARE_PRIORITY", priority},
      {"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"},
  };
  for (const auto& [k, v] : extra_env) env[k] = v;
  ChildProcess probe = ChildProcess::start({Artefacts::probe()}, env, dir / (job + ".stderr"));
  auto ready = probe.read_line(20s);
  if (!ready || ready->rfind("ready", 0) != 0) return ChildProcess();
  if (!cgroup_text.empty()) proc.place(probe.pid(), cgroup_text);
  if (before_init) before_init(probe.pid());
  if (probe.ask("init", 20s) != "ok") return ChildProcess();
  return probe;
}

TEST(PodIdentity, AFakeProcCgroupPutsTheJobInAPodWhoseRuleGrantsProduction) {
  TempDir dir;
  FakeProc proc(dir);
  Daemon daemon(dir, {{"production", {{{"pod_uid", kServeUid}}}}});
  daemon.extra_args = {"--proc-root", proc.root};
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ChildProcess serve = start_probe_in(dir, daemon, proc, systemd_cgroup(kServeUid, "", kServeId),
                                      "serve", "production");
  ChildProcess train = start_probe_in(
      dir, daemon, proc, systemd_cgroup(kTrainUid, "burstable", kTrainId), "train", "production");
  ChildProcess host = start_probe_in(dir, daemon, proc, "", "host", "production");
  ASSERT_TRUE(serve.running() && train.running() && host.running()) << daemon.log();

  auto s = job_with_pid(daemon.socket, serve.pid());
  ASSERT_TRUE(s) << list_jobs(daemon.socket).dump();
  EXPECT_EQ((*s)["class"], "production");
  EXPECT_EQ((*s)["pod_uid"], kServeUid);
  EXPECT_EQ((*s)["container_id"], kServeId);
  EXPECT_EQ((*s)["qos"], "guaranteed");
  EXPECT_NE(serve.ask("block").find("production"), std::string::npos);

  auto t = job_with_pid(daemon.socket, train.pid());
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)["class"], "opportunistic");  // another pod: no rule
  EXPECT_EQ((*t)["requested_class"], "production");
  EXPECT_EQ((*t)["pod_uid"], kTrainUid);
  EXPECT_EQ((*t)["qos"], "burstable");

  auto h = job_with_pid(daemon.socket, host.pid());
  ASSERT_TRUE(h);
  EXPECT_EQ((*h)["class"], "opportunistic");
  EXPECT_TRUE((*h)["pod_uid"].is_null());
  EXPECT_TRUE((*h)["container_id"].is_null());
  EXPECT_TRUE((*h)["qos"].is_null());

  EXPECT_TRUE(daemon.log_contains("pod=" + kServeUid + " container=" + kServeId +
                                  " qos=guaranteed class=production"))
      << daemon.log();
  EXPECT_TRUE(daemon.log_contains("refuse production pid=" + std::to_string(train.pid())));
  EXPECT_TRUE(daemon.log_contains("--proc-root " + proc.root));

  // The table grows pod columns when a job runs in a pod; the container id is shortened.
  CtlResult table = run_ctl(daemon.socket, {"jobs"});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("POD"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("CONTAINER"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(kServeUid + "  " + kServeId.substr(0, 12) + "  guaranteed"),
            std::string::npos)
      << table.out;
  EXPECT_EQ(table.out.find(kServeId.substr(0, 13)), std::string::npos) << table.out;

  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  EXPECT_EQ(status.json["daemon"]["proc_root"], proc.root) << status.out;
}

TEST(PodIdentity, NothingAClientSetsCanRaiseItsClass) {
  TempDir dir;
  FakeProc proc(dir);
  // The device plugin's state: one production allocation, whose token the liar has not been
  // given (docs/kubernetes.md).
  const std::string production_token(32, 'c');
  std::filesystem::create_directories(dir / "plugin/tokens");
  std::ofstream(dir / ("plugin/tokens/" + production_token)) << "{}";
  std::ofstream(dir / "plugin/allocations.json") << json{
      {"version", 1},
      {"allocations",
       {{{"token", production_token},
         {"resource", "gpushare.io/production"},
         {"devices", {"0-s0"}},
         {"namespace", "serving"},
         {"pod", "inference-0"},
         {"container", "server"}}}}}.dump();
  std::filesystem::permissions(dir / "plugin/allocations.json", std::filesystem::perms(0644));
  Daemon daemon(dir, {{"production",
                       {{{"pod_uid", kServeUid}, {"job", "serve"}},
                        {{"container_id", kServeId}},
                        {{"resource", "gpushare.io/production"}},
                        {{"namespace", "serving"}}}},
                      {"kubernetes", {{"allocations", dir / "plugin/allocations.json"}}}});
  daemon.extra_args = {"--proc-root", proc.root};
  ASSERT_TRUE(daemon.start()) << daemon.log();
  ChildProcess serve = start_probe_in(dir, daemon, proc, systemd_cgroup(kServeUid, "", kServeId),
                                      "serve", "production");
  ASSERT_TRUE(serve.running());

  // A fake /proc of the client's own, naming the production pod: only the daemon's
  // --proc-root counts.
  TempDir own;
  std::filesystem::create_directories(own / "proc");
  // A job in another pod asks for production with the production pod's name, its uid and its
  // container id in every variable a shim, a runtime or the kubelet's downward API might use.
  std::map<std::string, std::string> env = {
      {"GPUSHARE_POD_UID", kServeUid},
      {"POD_UID", kServeUid},
      {"KUBERNETES_POD_UID", kServeUid},
      {"GPUSHARE_CONTAINER_ID", kServeId},
      {"CONTAINER_ID", kServeId},
      {"GPUSHARE_QOS", "guaranteed"},
      {"GPUSHARE_PROC_ROOT", own / "proc"},
      {"GPUSHARE_CLASS", "production"},
      {"HOSTNAME", "serve"},
      // What the device plugin's allocation would say, and where its token would be.
      {"GPUSHARE_RESOURCE", "gpushare.io/production"},
      {"POD_NAMESPACE", "serving"},
      {"POD_NAME", "inference-0"},
      {"GPUSHARE_ALLOCATION", dir / ("plugin/tokens/" + production_token)},
  };
  // Its root points the token path at the production allocation's token: a symlink, refused.
  auto symlink_token = [&](pid_t pid) {
    std::string root = proc.root + "/" + std::to_string(pid) + "/root";
    std::filesystem::create_directories(root + "/etc/gpushare");
    std::filesystem::create_symlink(dir / ("plugin/tokens/" + production_token),
                                    root + protocol::kAllocationTokenPath);
  };
  ChildProcess liar =
      start_probe_in(dir, daemon, proc, systemd_cgroup(kTrainUid, "besteffort", kTrainId), "serve",
                     "production", env, symlink_token);
  ASSERT_TRUE(liar.running());
  auto l = job_with_pid(daemon.socket, liar.pid());
  ASSERT_TRUE(l);
  EXPECT_EQ((*l)["class"], "opportunistic");
  EXPECT_EQ((*l)["pod_uid"], kTrainUid);
  EXPECT_EQ((*l)["container_id"], kTrainId);
  EXPECT_EQ((*l)["qos"], "besteffort");
  EXPECT_TRUE((*l)["resource"].is_null());
  EXPECT_TRUE((*l)["pod_namespace"].is_null());

  // A raw client claims to be the production pod's process in the message (client_pid): the
  // daemon reads the cgroup of its SO_PEERCRED pid, which the fake /proc does not place in a pod.
  RawClient raw;
  ASSERT_TRUE(raw.connect(daemon.socket));
  int memfd = -1;
  auto reply = raw.register_job("serve", protocol::JobClass::production,
                                static_cast<uint32_t>(serve.pid()), &memfd);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->granted_class, static_cast<uint32_t>(protocol::JobClass::opportunistic));
  if (memfd >= 0) ::close(memfd);
  auto r = job_with_pid(daemon.socket, getpid());
  ASSERT_TRUE(r);
  EXPECT_TRUE((*r)["pod_uid"].is_null());
  EXPECT_EQ((*r)["class"], "opportunistic");
}

TEST(PodIdentity, MalformedCgroupsGiveNoPodAndAreLogged) {
  TempDir dir;
  FakeProc proc(dir);
  Daemon daemon(dir, {{"production", {{{"container_id", kServeId}}}}});
  daemon.extra_args = {"--proc-root", proc.root};
  ASSERT_TRUE(daemon.start()) << daemon.log();
  // The production container's path with a cgroup nested below it.
  std::string nested = systemd_cgroup(kServeUid, "", kServeId);
  nested.insert(nested.size() - 1, "/nested");
  ChildProcess probe = start_probe_in(dir, daemon, proc, nested, "nested", "production");
  ASSERT_TRUE(probe.running());
  auto j = job_with_pid(daemon.socket, probe.pid());
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["class"], "opportunistic");
  EXPECT_TRUE((*j)["pod_uid"].is_null());
  EXPECT_TRUE(daemon.wait_for_log("register pid=" + std::to_string(probe.pid()) +
                                  " uid=" + std::to_string(getuid()) + ": no pod identity"))
      << daemon.log();
}

TEST(PodIdentity, WithoutProcRootTheDaemonReadsTheKernelsProc) {
  TempDir dir;
  Daemon daemon(dir);
  ASSERT_TRUE(daemon.start());
  ChildProcess probe = start_probe(dir, daemon.socket, probe_as("host-job"));
  ASSERT_TRUE(probe.running());
  auto j = job_with_pid(daemon.socket, probe.pid());
  ASSERT_TRUE(j);
  EXPECT_TRUE(j->contains("pod_uid"));
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  EXPECT_EQ(status.json["daemon"]["proc_root"], "/proc");
  // This test runs outside Kubernetes; the table keeps its usual columns.
  if ((*j)["pod_uid"].is_null()) {
    EXPECT_EQ(run_ctl(daemon.socket, {"jobs"}).out.find("POD"), std::string::npos);
    EXPECT_FALSE(daemon.log_contains("no pod identity")) << daemon.log();
  }
}

TEST(PodIdentity, CheckConfigNamesBadPodValuesAndWarnsOfQosAlone) {
  TempDir dir;
  std::ofstream(dir / "bad.json")
      << R"({"production": [{"container_id": "containerd://abc"}, {"pod_uid": "x"}]})";
  ChildProcess check =
      ChildProcess::start({Artefacts::daemon(), "--check-config", "--config", dir / "bad.json"},
                          {{"PATH", "/usr/bin:/bin"}}, dir / "bad.stderr");
  int status = check.wait(10s);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::string err = read_file(dir / "bad.stderr");
  EXPECT_NE(err.find("production[0].container_id: expected a container id of 64 lowercase hex"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("production[1].pod_uid: expected a pod UID"), std::string::npos) << err;

  std::ofstream(dir / "qos.json") << R"({"production": [{"qos": "guaranteed"}]})";
  ChildProcess warn =
      ChildProcess::start({Artefacts::daemon(), "--check-config", "--config", dir / "qos.json"},
                          {{"PATH", "/usr/bin:/bin"}}, dir / "qos.stderr");
  std::string out;
  while (auto line = warn.read_line(10s)) out += *line + "\n";
  status = warn.wait(10s);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(out.find("warning: production[0]"), std::string::npos) << out;
  EXPECT_NE(out.find("names a QoS class but no uid/user, gid/group, pod_uid or container_id"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace gpushare::testing
