// The pod and container of a process from its cgroup path (daemon/container_identity.h): real
// paths of the kubelet's systemd and cgroupfs drivers, malformed ones, and hostile ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "authorization.h"
#include "config.h"
#include "container_identity.h"

namespace gpushare::daemon {
namespace {

const std::string kId = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kUid = "1a2b3c4d-5e6f-4789-abcd-ef0123456789";
const std::string kUidUnderscored = "1a2b3c4d_5e6f_4789_abcd_ef0123456789";

PodIdentity parsed(const std::string& path) {
  CgroupIdentity id = pod_from_cgroup_path(path);
  EXPECT_TRUE(id.problem.empty()) << path << ": " << id.problem;
  EXPECT_TRUE(id.pod) << path;
  return id.pod.value_or(PodIdentity{});
}

std::string problem_of(const std::string& path) {
  CgroupIdentity id = pod_from_cgroup_path(path);
  EXPECT_FALSE(id.pod) << path << " gave pod " << id.pod->pod_uid;
  EXPECT_FALSE(id.problem.empty()) << path;
  return id.problem;
}

TEST(CgroupIdentity, SystemdDriverBurstableContainerd) {
  PodIdentity pod = parsed("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                           kUidUnderscored + ".slice/cri-containerd-" + kId + ".scope");
  EXPECT_EQ(pod.qos, PodQos::burstable);
  EXPECT_EQ(pod.pod_uid, kUid);  // '_' back to '-'
  EXPECT_EQ(pod.container_id, kId);
  EXPECT_EQ(pod.runtime, "containerd");
  EXPECT_FALSE(pod.pod_namespace);  // only the device plugin's allocation knows these
  EXPECT_FALSE(pod.pod_name);
  EXPECT_FALSE(pod.resource);
}

TEST(CgroupIdentity, SystemdDriverBestEffortCrioAndDocker) {
  PodIdentity crio = parsed("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                            kUidUnderscored + ".slice/crio-" + kId + ".scope");
  EXPECT_EQ(crio.qos, PodQos::besteffort);
  EXPECT_EQ(crio.runtime, "crio");
  PodIdentity docker = parsed("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                              kUidUnderscored + ".slice/docker-" + kId + ".scope");
  EXPECT_EQ(docker.runtime, "docker");
  EXPECT_EQ(docker.container_id, kId);
}

TEST(CgroupIdentity, GuaranteedPodsHaveNoQosLevel) {
  PodIdentity systemd = parsed("/kubepods.slice/kubepods-pod" + kUidUnderscored +
                               ".slice/cri-containerd-" + kId + ".scope");
  EXPECT_EQ(systemd.qos, PodQos::guaranteed);
  EXPECT_EQ(systemd.pod_uid, kUid);
  PodIdentity cgroupfs = parsed("/kubepods/pod" + kUid + "/" + kId);
  EXPECT_EQ(cgroupfs.qos, PodQos::guaranteed);
  EXPECT_EQ(cgroupfs.pod_uid, kUid);
  EXPECT_EQ(cgroupfs.container_id, kId);
}

TEST(CgroupIdentity, CgroupfsDriver) {
  PodIdentity pod = parsed("/kubepods/burstable/pod" + kUid + "/" + kId);
  EXPECT_EQ(pod.qos, PodQos::burstable);
  EXPECT_EQ(pod.pod_uid, kUid);
  EXPECT_EQ(pod.container_id, kId);
  EXPECT_EQ(pod.runtime, "");
  EXPECT_EQ(parsed("/kubepods/besteffort/pod" + kUid + "/crio-" + kId).runtime, "crio");
}

TEST(CgroupIdentity, StaticPodsHaveAHashForUid) {
  std::string hash = "8d5f9b3c2a1e4f6b7c8d9e0f1a2b3c4d";
  EXPECT_EQ(parsed("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + hash +
                   ".slice/cri-containerd-" + kId + ".scope")
                .pod_uid,
            hash);
}

TEST(CgroupIdentity, AParentSliceOfTheKubeletsCgroupRootIsAllowed) {
  // kind and kubelets started with --cgroup-root=/kubelet.slice.
  PodIdentity pod = parsed(
      "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
      "kubelet-kubepods-besteffort-pod" +
      kUidUnderscored + ".slice/cri-containerd-" + kId + ".scope");
  EXPECT_EQ(pod.qos, PodQos::besteffort);
  EXPECT_EQ(pod.pod_uid, kUid);
}

TEST(CgroupIdentity, ProcessesOutsideKubernetesHaveNoPodAndNoProblem) {
  for (const std::string& path : std::vector<std::string>{
           "/", "/user.slice/user-1000.slice/session-3.scope", "/system.slice/gpushared.service",
           "/docker/" + kId, "/process_api/60d8f57744c934352dea475d3c864c7f"}) {
    CgroupIdentity id = pod_from_cgroup_path(path);
    EXPECT_FALSE(id.pod) << path;
    EXPECT_EQ(id.problem, "") << path;
  }
}

TEST(CgroupIdentity, MalformedKubepodsPathsAreRefusedWithAReason) {
  std::string pod_slice = "kubepods-burstable-pod" + kUidUnderscored + ".slice";
  std::string scope = "cri-containerd-" + kId + ".scope";
  // The pod's own cgroup (the pause process, or a process not yet in a container).
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice);
  problem_of("/kubepods/burstable/pod" + kUid);
  // Short, long, upper-case or non-hex container ids.
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/cri-containerd-" +
             kId.substr(1) + ".scope");
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/cri-containerd-" + kId +
             "0.scope");
  std::string upper = kId;
  upper[0] = 'A';
  problem_of("/kubepods/burstable/pod" + kUid + "/" + upper);
  std::string not_hex = kId;
  not_hex[5] = 'g';
  problem_of("/kubepods/burstable/pod" + kUid + "/" + not_hex);
  // Unknown runtime prefix; conmon's scope (CRI-O) is not the container.
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/runc-" + kId + ".scope");
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/crio-conmon-" + kId +
             ".scope");
  // systemd scope without prefix.
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/" + kId + ".scope");
  // Unknown QoS level; the QoS slice not extending kubepods; pod uid with '-' in a slice.
  problem_of("/kubepods.slice/kubepods-gold.slice/kubepods-gold-pod" + kUidUnderscored + ".slice/" +
             scope);
  problem_of("/kubepods.slice/burstable.slice/" + pod_slice + "/" + scope);
  problem_of("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUid + ".slice/" +
             scope);
  problem_of("/kubepods/gold/pod" + kUid + "/" + kId);
  // Bad pod uids.
  problem_of("/kubepods/burstable/pod" + kUid.substr(1) + "/" + kId);
  problem_of("/kubepods/burstable/podNOT-A-UID/" + kId);
  problem_of("/kubepods/burstable/" + kUid + "/" + kId);
  problem_of("/kubepods/burstable/pod" + kUidUnderscored + "/" + kId);
  // Trailing '/', empty segments, relative paths.
  problem_of("/kubepods/burstable/pod" + kUid + "/" + kId + "/");
  problem_of("/kubepods//burstable/pod" + kUid + "/" + kId);
  problem_of("kubepods/burstable/pod" + kUid + "/" + kId);
}

TEST(CgroupIdentity, HostilePathsAreRefused) {
  std::string pod_slice = "kubepods-burstable-pod" + kUidUnderscored + ".slice";
  std::string scope = "cri-containerd-" + kId + ".scope";
  std::string real = "/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/" + scope;
  // A privileged container making cgroups below its own scope: nothing may follow it, and no
  // second kubepods path may be nested there.
  problem_of(real + "/child");
  problem_of(real + "/kubepods.slice/kubepods-pod" + kUidUnderscored + ".slice/" + scope);
  problem_of("/kubepods/burstable/pod" + kUid + "/" + kId + "/kubepods/pod" + kUid + "/" + kId);
  problem_of("/kubepods/burstable/pod" + kUid + "/" + kId + "/x");
  // Outside the daemon's cgroup namespace: "/.." prefixes.
  problem_of("/../../kubepods-burstable-pod" + kUidUnderscored + ".slice/" + scope);
  problem_of("/kubepods/burstable/../burstable/pod" + kUid + "/" + kId);
  // Control bytes, spaces (" (deleted)"), non-ASCII, and absurd lengths.
  problem_of(real + " (deleted)");
  problem_of("/kubepods/burstable/pod" + kUid + "/" + kId + "\n0::/");
  problem_of("/kubepods/burstable/pod" + kUid + "/\xc3\xa9" + kId);
  problem_of("/kubepods/" + std::string(5000, 'a') + "/pod" + kUid + "/" + kId);
  problem_of(std::string("/kubepods/burstable/pod") + std::string(1, '\0') + kUid + "/" + kId);
  // Names that contain kubepods but are not the kubelet's.
  problem_of("/notkubepods/burstable/pod" + kUid + "/" + kId);
  problem_of("/kubepods.slice/kubepods-burstable.slice/" + pod_slice + "/kubepods-" + kId +
             ".scope");
}

TEST(CgroupIdentity, ProcCgroupFileV2AndV1) {
  std::string path = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                     kUidUnderscored + ".slice/cri-containerd-" + kId + ".scope";
  CgroupIdentity v2 = pod_from_proc_cgroup("0::" + path + "\n");
  ASSERT_TRUE(v2.pod) << v2.problem;
  EXPECT_EQ(v2.pod->container_id, kId);
  // cgroup v1, cgroupfs driver, with a hybrid "0::/" line and controllers the runtime left alone.
  std::string v1_path = "/kubepods/besteffort/pod" + kUid + "/" + kId;
  CgroupIdentity v1 = pod_from_proc_cgroup("12:memory:" + v1_path + "\n11:cpu,cpuacct:" + v1_path +
                                           "\n5:rdma:/\n1:name=systemd:" + v1_path + "\n0::/\n");
  ASSERT_TRUE(v1.pod) << v1.problem;
  EXPECT_EQ(v1.pod->qos, PodQos::besteffort);
  EXPECT_EQ(v1.pod->pod_uid, kUid);
  // A host process.
  CgroupIdentity host = pod_from_proc_cgroup("0::/user.slice/user-1000.slice/session-1.scope\n");
  EXPECT_FALSE(host.pod);
  EXPECT_EQ(host.problem, "");
  EXPECT_FALSE(pod_from_proc_cgroup("").pod);
}

TEST(CgroupIdentity, ProcCgroupFileThatDisagreesOrIsMalformedGivesNoPod) {
  std::string other = kId;
  other[63] = '0';
  std::string a = "/kubepods/burstable/pod" + kUid + "/" + kId;
  std::string b = "/kubepods/burstable/pod" + kUid + "/" + other;
  EXPECT_FALSE(pod_from_proc_cgroup("12:memory:" + a + "\n11:cpu:" + b + "\n").pod);
  EXPECT_FALSE(pod_from_proc_cgroup("12:memory:" + a + "\n11:cpu:" + a + "/x\n").pod);
  EXPECT_FALSE(pod_from_proc_cgroup("garbage\n").pod);
  EXPECT_FALSE(pod_from_proc_cgroup("x:memory:" + a + "\n").pod);
  std::string many;
  for (int i = 0; i < 100; ++i) many += "0::" + a + "\n";
  EXPECT_FALSE(pod_from_proc_cgroup(many).pod);
  EXPECT_FALSE(pod_from_proc_cgroup(std::string(70000, '\n')).pod);
}

TEST(CgroupIdentity, ReadsPidCgroupUnderAProcRoot) {
  std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("gpushare-proc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "4242");
  std::ofstream(root / "4242" / "cgroup") << "0::/kubepods/pod" << kUid << "/" << kId << "\n";
  CgroupIdentity id = read_pod_identity(root.string(), 4242);
  ASSERT_TRUE(id.pod) << id.problem;
  EXPECT_EQ(id.pod->qos, PodQos::guaranteed);
  CgroupIdentity missing = read_pod_identity(root.string(), 4243);
  EXPECT_FALSE(missing.pod);
  EXPECT_NE(missing.problem.find("4243/cgroup"), std::string::npos) << missing.problem;
  std::filesystem::remove_all(root);
}

// --- production rules by pod --------------------------------------------------------------------

Config config_of(const std::string& text) {
  ConfigResult r = parse_config(text);
  EXPECT_TRUE(r.config) << r.error_text();
  return r.config.value_or(Config{});
}

Peer in_pod(PodQos qos, std::string pod_uid = kUid, std::string container_id = kId) {
  Peer peer;
  peer.pid = 100;
  peer.uid = 0;
  peer.gid = 0;
  peer.pod =
      PodIdentity{qos, std::move(pod_uid), std::move(container_id), "containerd", {}, {}, {}, {}};
  return peer;
}

TEST(PodRules, APodOrContainerRuleMatchesOnlyThatPodOrContainer) {
  std::string other_uid = "ffffffff-5e6f-4789-abcd-ef0123456789";
  std::string other_id(64, 'e');
  Config config = config_of(R"({"production": [{"pod_uid": ")" + kUid + R"("}]})");
  EXPECT_TRUE(production_rule_for(config, in_pod(PodQos::burstable), "any"));
  EXPECT_FALSE(production_rule_for(config, in_pod(PodQos::burstable, other_uid), "any"));
  Peer host;  // uid 0, not in a pod
  EXPECT_FALSE(production_rule_for(config, host, "any"));

  Config by_container = config_of(R"({"production": [{"container_id": ")" + kId + R"("}]})");
  EXPECT_TRUE(production_rule_for(by_container, in_pod(PodQos::besteffort), "x"));
  EXPECT_FALSE(production_rule_for(by_container, in_pod(PodQos::besteffort, kUid, other_id), "x"));
}

TEST(PodRules, AllKeysOfARuleMustMatch) {
  Config config = config_of(R"({"production": [{"pod_uid": ")" + kUid +
                            R"(", "qos": "guaranteed", "job": "serve-*", "uid": 0}]})");
  EXPECT_TRUE(production_rule_for(config, in_pod(PodQos::guaranteed), "serve-a"));
  EXPECT_FALSE(production_rule_for(config, in_pod(PodQos::burstable), "serve-a"));
  EXPECT_FALSE(production_rule_for(config, in_pod(PodQos::guaranteed), "train"));
  Peer other_user = in_pod(PodQos::guaranteed);
  other_user.uid = 1000;
  EXPECT_FALSE(production_rule_for(config, other_user, "serve-a"));
}

TEST(PodRules, AQosClassOrAJobNameAloneIdentifiesNobodyAndIsWarnedOf) {
  // Anyone who may create a pod can make it guaranteed (requests = limits).
  Config config = config_of(R"({"production": [{"qos": "guaranteed"},
                                               {"qos": "guaranteed", "job": "serve"}]})");
  EXPECT_FALSE(production_rule_for(config, in_pod(PodQos::guaranteed), "serve"));
  std::vector<std::string> warnings = config_warnings(config);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("production[0]"), std::string::npos);
  EXPECT_NE(warnings[0].find("QoS class"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("production[1]"), std::string::npos);
  // With a uid, a gid, a pod or a container it is an identity.
  EXPECT_TRUE(
      config_warnings(config_of(R"({"production": [{"qos": "guaranteed", "uid": 0}]})")).empty());
}

TEST(PodRules, CheckConfigNamesBadPodValues) {
  ConfigResult r = parse_config(R"({"production": [
      {"pod_uid": "1A2B3C4D-5E6F-4789-ABCD-EF0123456789"},
      {"pod_uid": "pod-1"},
      {"container_id": "containerd://0123"},
      {"container_id": 7},
      {"qos": "gold"},
      {"pod_uid": "1a2b3c4d_5e6f_4789_abcd_ef0123456789"},
      {"namespace": "Prod"},
      {"labels": {"tier": "prod"}}]})");
  ASSERT_FALSE(r.config);
  std::string text = r.error_text();
  EXPECT_NE(text.find("production[0].pod_uid: expected a pod UID in lowercase"), std::string::npos)
      << text;
  EXPECT_NE(text.find("production[1].pod_uid"), std::string::npos) << text;
  EXPECT_NE(text.find("production[2].container_id: expected a container id of 64 lowercase hex"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("production[3].container_id: expected a string"), std::string::npos) << text;
  EXPECT_NE(text.find("production[4].qos: expected one of guaranteed, burstable, besteffort"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("production[5].pod_uid"), std::string::npos) << text;
  // Namespaces come from the device plugin, in Kubernetes' syntax; labels never (kubernetes.md).
  EXPECT_NE(text.find("production[6].namespace: expected a namespace name"), std::string::npos)
      << text;
  EXPECT_NE(text.find("production[7].labels: unknown field"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpushare::daemon
