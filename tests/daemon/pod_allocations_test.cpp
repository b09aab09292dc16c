// The device plugin's allocation map as the daemon reads it (daemon/pod_allocations.h): strict
// validation, the token matched by inode inside the job's root and nothing else, and production
// rules by resource, namespace and pod.
#include "pod_allocations.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "authorization.h"
#include "config.h"
#include "gpushare/protocol/pod_allocation.h"

namespace gpushare::daemon {
namespace {

namespace fs = std::filesystem;

const std::string kToken(32, 'a');
const std::string kOther(32, 'b');

std::string map_text(const std::string& allocations) {
  return R"({"version": 1, "allocations": [)" + allocations + "]}";
}

std::string entry(const std::string& token, const std::string& resource,
                  const std::string& pod_fields = "") {
  return R"({"token": ")" + token + R"(", "resource": ")" + resource + R"(", "devices": ["0-s0"])" +
         pod_fields + "}";
}

TEST(PodAllocations, AWellFormedMapParses) {
  PodAllocations map = parse_pod_allocations(
      map_text(entry(kToken, "gpushare.io/production",
                     R"(, "namespace": "serving", "pod": "inference-0.a", "container": "server")") +
               "," + entry(kOther, "gpushare.io/opportunistic")));
  ASSERT_EQ(map.problem, "");
  ASSERT_EQ(map.allocations.size(), 2u);
  EXPECT_EQ(map.allocations[0].pod_namespace, "serving");
  EXPECT_EQ(map.allocations[0].pod_name, "inference-0.a");
  EXPECT_EQ(map.allocations[0].container, "server");
  EXPECT_FALSE(map.allocations[1].pod_name);
}

TEST(PodAllocations, AnythingUnexpectedRefusesTheWholeMap) {
  std::string good = entry(kToken, "gpushare.io/production");
  for (const std::string& text : {
           std::string("not json"),
           std::string("[]"),
           std::string(R"({"version": 2, "allocations": []})"),
           std::string(R"({"version": 1, "allocations": [], "extra": 1})"),
           std::string(R"({"version": 1})"),
           map_text(good + "," + good),  // a token twice
           map_text(entry("AAAA", "gpushare.io/production")),
           map_text(entry(kToken, "production")),
           map_text(R"({"token": ")" + kToken + R"(", "resource": "a.io/b", "devices": []})"),
           map_text(entry(kToken, "a.io/b", R"(, "granted": "production")")),
           map_text(entry(kToken, "a.io/b", R"(, "namespace": "serving")")),  // without pod
           map_text(entry(kToken, "a.io/b",
                          R"(, "namespace": "Serving", "pod": "p", "container": "c")")),
       }) {
    PodAllocations map = parse_pod_allocations(text);
    EXPECT_NE(map.problem, "") << text;
    EXPECT_TRUE(map.allocations.empty()) << text;
  }
}

// A plugin state folder and a fake /proc in a temporary folder.
struct Node {
  Node() {
    char pattern[] = "/tmp/gpushare-allocations-XXXXXX";
    root = mkdtemp(pattern);
    fs::create_directories(root + "/state/tokens");
    fs::create_directories(root + "/proc/42/root/etc/gpushare");
    std::ofstream(token(kToken)) << "{}";
    std::ofstream(token(kOther)) << "{}";
    write_map(map_text(entry(kToken, "gpushare.io/production") + "," +
                       entry(kOther, "gpushare.io/opportunistic")));
  }
  ~Node() { fs::remove_all(root); }
  std::string token(const std::string& id) const { return root + "/state/tokens/" + id; }
  std::string map() const { return root + "/state/allocations.json"; }
  std::string held() const { return root + "/proc/42/root" + protocol::kAllocationTokenPath; }
  void write_map(const std::string& text) const {
    std::ofstream(map()) << text;
    fs::permissions(map(), fs::perms(0644));
  }
  AllocationLookup lookup() const { return allocation_of_process(map(), root + "/proc", 42); }
  std::string root;
};

TEST(PodAllocations, TheTokenInTheJobsRootIsMatchedByInode) {
  Node node;
  EXPECT_FALSE(node.lookup().allocation);  // no token: no allocation, no problem
  EXPECT_EQ(node.lookup().problem, "");
  fs::create_hard_link(node.token(kOther), node.held());
  AllocationLookup held = node.lookup();
  ASSERT_TRUE(held.allocation) << held.problem;
  EXPECT_EQ(held.allocation->resource, "gpushare.io/opportunistic");
}

TEST(PodAllocations, ACopyOrASymlinkOfAnotherTokenIsNoToken) {
  Node node;
  fs::copy_file(node.token(kToken), node.held());  // same content, another file
  EXPECT_FALSE(node.lookup().allocation);
  EXPECT_NE(node.lookup().problem.find("is no token of"), std::string::npos);
  fs::remove(node.held());
  fs::create_symlink(node.token(kToken), node.held());
  EXPECT_FALSE(node.lookup().allocation);
  EXPECT_NE(node.lookup().problem.find("symlink"), std::string::npos) << node.lookup().problem;
  fs::remove(node.held());
  fs::remove(node.root + "/proc/42/root/etc/gpushare");
  fs::create_directory_symlink(node.root + "/state/tokens",
                               node.root + "/proc/42/root/etc/gpushare");
  EXPECT_FALSE(node.lookup().allocation);
}

TEST(PodAllocations, AMapOthersMayWriteIsNotTrusted) {
  Node node;
  fs::create_hard_link(node.token(kToken), node.held());
  ASSERT_TRUE(node.lookup().allocation);
  fs::permissions(node.map(), fs::perms(0666));
  EXPECT_FALSE(node.lookup().allocation);
  EXPECT_NE(node.lookup().problem.find("writable by group or others"), std::string::npos);
  node.write_map("{");
  EXPECT_NE(node.lookup().problem.find("not valid JSON"), std::string::npos);
}

TEST(PodAllocations, RulesMatchTheResourceTheNamespaceAndThePodName) {
  ConfigResult parsed = parse_config(R"({"production": [
      {"resource": "gpushare.io/production"},
      {"namespace": "serving", "pod": "inference-*"}],
      "kubernetes": {"allocations": "/var/lib/gpushare/device-plugin/allocations.json"}})");
  ASSERT_TRUE(parsed.config) << parsed.error_text();
  EXPECT_EQ(parsed.config->kubernetes.allocations,
            "/var/lib/gpushare/device-plugin/allocations.json");
  Peer peer;
  peer.uid = 0;
  EXPECT_FALSE(production_rule_for(*parsed.config, peer, "job"));  // not in a pod
  peer.pod = PodIdentity{};
  EXPECT_FALSE(production_rule_for(*parsed.config, peer, "job"));  // no allocation
  peer.pod->resource = "gpushare.io/opportunistic";
  EXPECT_FALSE(production_rule_for(*parsed.config, peer, "job"));
  peer.pod->resource = "gpushare.io/production";
  EXPECT_EQ(production_rule_for(*parsed.config, peer, "job"), &parsed.config->production_rules[0]);
  peer.pod->resource = "gpushare.io/opportunistic";
  peer.pod->pod_namespace = "serving";
  peer.pod->pod_name = "training-0";
  EXPECT_FALSE(production_rule_for(*parsed.config, peer, "job"));
  peer.pod->pod_name = "inference-0";
  EXPECT_EQ(production_rule_for(*parsed.config, peer, "job"), &parsed.config->production_rules[1]);
  peer.pod->pod_namespace = "batch";
  EXPECT_FALSE(production_rule_for(*parsed.config, peer, "job"));
}

TEST(PodAllocations, BadRuleKeysAndAPodNameAloneAreNamed) {
  ConfigResult bad = parse_config(R"({"production": [{"resource": "production"},
      {"namespace": "Not_A_Namespace"}], "kubernetes": {"allocations": "relative.json"}})");
  EXPECT_FALSE(bad.config);
  std::string errors = bad.error_text();
  EXPECT_NE(errors.find("production[0].resource: expected an extended resource"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("production[1].namespace: expected a namespace name"), std::string::npos);
  EXPECT_NE(errors.find("kubernetes.allocations: expected the absolute path"), std::string::npos);

  ConfigResult alone = parse_config(R"({"production": [{"pod": "inference-*"}]})");
  ASSERT_TRUE(alone.config);
  Peer peer;
  peer.pod = PodIdentity{};
  peer.pod->pod_name = "inference-0";
  EXPECT_FALSE(production_rule_for(*alone.config, peer, "job"));
  auto warnings = config_warnings(*alone.config);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("names a pod but no namespace"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::daemon
