// The device plugin's decisions without gRPC: share ids and GPUs, preferred allocations, what an
// allocation returns, the allocation map, the kubelet watch and the command line.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "allocation_map.h"
#include "container_allocation.h"
#include "gpu_discovery.h"
#include "gpushare/protocol/pod_allocation.h"
#include "kubelet_watch.h"
#include "plugin_options.h"
#include "shares.h"

namespace gpushare::deviceplugin {
namespace {

const std::string kGpuA = "GPU-fef8089b-4820-abfc-e83e-94318197576e";
const std::string kGpuB = "GPU-0a1b2c3d-4820-abfc-e83e-94318197576e";

TEST(Shares, IdsNameTheirGpuEvenWhenItsUuidHasDashes) {
  EXPECT_EQ(share_id(kGpuA, 3), kGpuA + "-s3");
  EXPECT_EQ(gpu_of_share(kGpuA + "-s3"), kGpuA);
  EXPECT_EQ(gpu_of_share("0-s12"), "0");
  EXPECT_FALSE(gpu_of_share("0-s"));
  EXPECT_FALSE(gpu_of_share("0-s01"));
  EXPECT_FALSE(gpu_of_share("-s1"));
  EXPECT_FALSE(gpu_of_share("0-x1"));
  EXPECT_EQ(share_ids({"0", "1"}, 2), (std::vector<std::string>{"0-s0", "0-s1", "1-s0", "1-s1"}));
}

TEST(Shares, AllocatedIdsMustBeThisPluginsShares) {
  auto gpus = gpus_of_shares({kGpuB + "-s1", kGpuA + "-s0"}, {kGpuA, kGpuB}, 2);
  EXPECT_EQ(gpus.error, "");
  EXPECT_EQ(gpus.gpus, (std::vector<std::string>{kGpuA, kGpuB}));    // in the node's order
  EXPECT_NE(gpus_of_shares({kGpuA + "-s2"}, {kGpuA}, 2).error, "");  // beyond N shares
  EXPECT_NE(gpus_of_shares({"GPU-other-s0"}, {kGpuA}, 2).error, "");
  EXPECT_NE(gpus_of_shares({"nonsense"}, {kGpuA}, 2).error, "");
  EXPECT_NE(gpus_of_shares({}, {kGpuA}, 2).error, "");
}

TEST(Shares, PreferredAllocationKeepsAContainerOnTheGpuWithMostFreeShares) {
  // GPU 0 has one free share, GPU 1 three: two shares go to GPU 1, in share order.
  std::vector<std::string> available = {"0-s2", "1-s3", "1-s1", "1-s0"};
  EXPECT_EQ(preferred_shares(available, {}, 2), (std::vector<std::string>{"1-s0", "1-s1"}));
  // What the kubelet must include comes first, and its GPU is filled before another.
  EXPECT_EQ(preferred_shares(available, {"0-s2"}, 2), (std::vector<std::string>{"0-s2", "1-s0"}));
  available.push_back("0-s3");
  EXPECT_EQ(preferred_shares(available, {"0-s2"}, 2), (std::vector<std::string>{"0-s2", "0-s3"}));
  // More than there is: all of it.
  EXPECT_EQ(preferred_shares({"0-s0"}, {}, 3), (std::vector<std::string>{"0-s0"}));
  EXPECT_TRUE(preferred_shares(available, {}, 0).empty());
}

TEST(ContainerAllocation, MountsTheLibraryTheSocketAndTheTokenAndNamesTheGpus) {
  AllocationSettings settings{"/usr/lib/gpushare/libgpushare.so", "/run/gpushare"};
  ContainerAllocation a =
      container_allocation(settings, "production", {kGpuA, kGpuB}, "/state/tokens/abc");
  EXPECT_EQ(a.envs.at("LD_PRELOAD"), "/usr/lib/gpushare/libgpushare.so");
  EXPECT_EQ(a.envs.at("GPUSHARE_PRIORITY"), "production");
  EXPECT_EQ(a.envs.at("GPUSHARE_SOCKET"), "/run/gpushare/gpushared.sock");
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), kGpuA + "," + kGpuB);
  EXPECT_EQ(a.envs.at("CUDA_VISIBLE_DEVICES"), kGpuA + "," + kGpuB);
  std::vector<Mount> expected = {{"/usr/lib/gpushare", "/usr/lib/gpushare", true},
                                 {"/run/gpushare", "/run/gpushare", true},
                                 {protocol::kAllocationTokenPath, "/state/tokens/abc", true}};
  EXPECT_EQ(a.mounts, expected);
  EXPECT_TRUE(a.cdi_devices.empty());
}

TEST(ContainerAllocation, IndicesAreRenumberedInTheContainerAndCdiNamesTheGpus) {
  AllocationSettings settings{"/lib/libgpushare.so", "/run/gpushare"};
  settings.cdi = true;
  ContainerAllocation a = container_allocation(settings, "opportunistic", {"1", "3"}, "/t");
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "1,3");
  EXPECT_EQ(a.envs.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(a.envs.at("GPUSHARE_PRIORITY"), "opportunistic");
  EXPECT_EQ(a.cdi_devices, (std::vector<std::string>{"nvidia.com/gpu=1", "nvidia.com/gpu=3"}));
}

PodContainer held(std::string ns, std::string pod, std::string container, std::string resource,
                  std::vector<std::string> ids) {
  return {std::move(ns), std::move(pod), std::move(container), {{resource, std::move(ids)}}};
}

TEST(AllocationMap, PodResourcesNameTheHolderOfEachToken) {
  std::vector<AllocationToken> tokens = {
      {"aa", "gpushare.io/production", {"0-s0"}, 100},
      {"bb", "gpushare.io/opportunistic", {"0-s0", "0-s1"}, 100},
  };
  std::vector<PodContainer> pods = {
      held("serving", "infer", "server", "gpushare.io/production", {"0-s0"}),
      // The same id of another resource is another share.
      held("batch", "train", "trainer", "gpushare.io/opportunistic", {"0-s1", "0-s0"}),
  };
  AllocationMap map = map_allocations(tokens, pods, 110, 300);
  ASSERT_EQ(map.live.size(), 2u);
  EXPECT_TRUE(map.dead.empty());
  EXPECT_EQ(map.live[0].holder->pod_name, "infer");
  EXPECT_EQ(map.live[1].holder->pod_namespace, "batch");
  auto doc = nlohmann::json::parse(allocation_map_json(map));
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["allocations"][0]["token"], "aa");
  EXPECT_EQ(doc["allocations"][0]["namespace"], "serving");
  EXPECT_EQ(doc["allocations"][0]["container"], "server");
  EXPECT_EQ(doc["allocations"][1]["devices"], nlohmann::json({"0-s0", "0-s1"}));
}

TEST(AllocationMap, ANewerTokenForTheSameShareEndsTheOlderOne) {
  std::vector<AllocationToken> tokens = {
      {"old", "gpushare.io/production", {"0-s0"}, 100},
      {"new", "gpushare.io/production", {"0-s0"}, 200},
  };
  AllocationMap map = map_allocations(tokens, std::nullopt, 210, 300);
  ASSERT_EQ(map.live.size(), 1u);
  EXPECT_EQ(map.live[0].token.id, "new");
  EXPECT_FALSE(map.live[0].holder);
  EXPECT_EQ(map.dead, (std::vector<std::string>{"old"}));
  EXPECT_FALSE(nlohmann::json::parse(allocation_map_json(map))["allocations"][0].contains("pod"));
}

TEST(AllocationMap, AnUnheldTokenEndsAfterTheGraceOnlyWhenPodResourcesAnswered) {
  std::vector<AllocationToken> tokens = {{"aa", "gpushare.io/production", {"0-s0"}, 100}};
  EXPECT_EQ(map_allocations(tokens, std::vector<PodContainer>{}, 300, 300).live.size(), 1u);
  EXPECT_EQ(map_allocations(tokens, std::vector<PodContainer>{}, 401, 300).dead,
            (std::vector<std::string>{"aa"}));
  EXPECT_EQ(map_allocations(tokens, std::nullopt, 10000, 300).live.size(), 1u);
}

TEST(AllocationMap, ATokenHeldLongAgoLivesAGraceAfterItWasLastSeenHeld) {
  // A kubelet that has just restarted lists only some pods: a long-held token outlives that.
  std::vector<AllocationToken> tokens = {{"aa", "gpushare.io/production", {"0-s0"}, 100}};
  std::vector<PodContainer> holding = {
      held("serving", "infer", "server", "gpushare.io/production", {"0-s0"})};
  AllocationMap seen = map_allocations(tokens, holding, 5000, 300);
  ASSERT_EQ(seen.live.size(), 1u);
  EXPECT_EQ(seen.live[0].token.last_held, 5000);
  tokens[0].last_held = 5000;
  EXPECT_EQ(map_allocations(tokens, std::vector<PodContainer>{}, 5100, 300).live.size(), 1u);
  EXPECT_EQ(map_allocations(tokens, std::vector<PodContainer>{}, 5301, 300).dead.size(), 1u);
}

TEST(AllocationMap, TokensReadBackAsWritten) {
  AllocationToken t{"aa", "gpushare.io/production", {"0-s0", "1-s1"}, 1234};
  EXPECT_EQ(token_from_json("aa", token_json(t)), t);
  EXPECT_FALSE(token_from_json("aa", "{}"));
  EXPECT_FALSE(token_from_json("aa", "not json"));
  EXPECT_FALSE(token_from_json("aa", R"({"resource":"r","devices":[1],"created":1})"));
}

TEST(KubeletWatch, RegistersAgainWhenTheKubeletSocketIsNewOrItsOwnSocketIsGone) {
  SocketIdentity none;
  SocketIdentity first{true, 1, 10};
  SocketIdentity second{true, 1, 11};
  EXPECT_EQ(watch_action(none, none, false), WatchAction::wait);
  EXPECT_EQ(watch_action(first, none, false), WatchAction::serve_and_register);
  EXPECT_EQ(watch_action(first, first, true), WatchAction::none);
  EXPECT_EQ(watch_action(second, first, true), WatchAction::serve_and_register);
  EXPECT_EQ(watch_action(first, first, false), WatchAction::serve_and_register);
}

TEST(GpuDiscovery, ListsTheGpusInPciOrderAndNamesFoldersWithoutAUuid) {
  char pattern[] = "/tmp/gpushare-gpus-XXXXXX";
  std::string root = mkdtemp(pattern);
  auto gpu = [&](const std::string& bus, const std::string& text) {
    std::filesystem::create_directories(root + "/" + bus);
    std::ofstream(root + "/" + bus + "/information") << text;
  };
  gpu("0000:41:00.0", "GPU UUID: \t " + kGpuA + "\n");
  gpu("0000:01:00.0", "GPU UUID: \t " + kGpuB + "\n");
  gpu("0000:81:00.0", "Model: broken\n");
  std::vector<std::string> problems;
  EXPECT_EQ(discover_gpus(root, &problems), (std::vector<std::string>{kGpuB, kGpuA}));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("0000:81:00.0/information: no GPU UUID line"), std::string::npos);
  std::filesystem::remove_all(root);
}

TEST(GpuDiscovery, ReadsTheUuidOfTheDriversInformationFile) {
  std::string info = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t " + kGpuA +
                     "\nVideo BIOS: \t 96.00.99.00.01\n";
  EXPECT_EQ(uuid_from_information(info), kGpuA);
  EXPECT_FALSE(uuid_from_information("Model: x\n"));
  EXPECT_FALSE(uuid_from_information("GPU UUID: \t ??\n"));
}

ParsedOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "gpushare-device-plugin");
  return parse_plugin_options(static_cast<int>(args.size()), args.data());
}

TEST(PluginOptions, DefaultsAdvertiseTwoResourcesOnTheirOwnSockets) {
  ParsedOptions p = parse({"--gpus", "0,1", "--production-shares", "1"});
  ASSERT_TRUE(p.options) << (p.errors.empty() ? "" : p.errors[0]);
  EXPECT_EQ(p.options->gpus, (std::vector<std::string>{"0", "1"}));
  auto classes = resource_classes(*p.options);
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].resource, "gpushare.io/production");
  EXPECT_EQ(classes[0].shares_per_gpu, 1);
  EXPECT_EQ(classes[1].resource, "gpushare.io/opportunistic");
  EXPECT_NE(classes[0].endpoint, classes[1].endpoint);
}

TEST(PluginOptions, BadValuesAreNamedWithTheirFlag) {
  auto errors_of = [](std::vector<const char*> args) {
    ParsedOptions p = parse(std::move(args));
    EXPECT_FALSE(p.options);
    std::string all;
    for (const auto& e : p.errors) all += e + "\n";
    return all;
  };
  EXPECT_NE(errors_of({"--state-dir", "relative"}).find("--state-dir: expected an absolute path"),
            std::string::npos);
  EXPECT_NE(errors_of({"--resource-prefix", "Bad_Prefix"}).find("--resource-prefix"),
            std::string::npos);
  EXPECT_NE(errors_of({"--gpus", "0,0"}).find("'0' is given twice"), std::string::npos);
  EXPECT_NE(errors_of({"--gpus", "a/b"}).find("--gpus: 'a/b'"), std::string::npos);
  EXPECT_NE(errors_of({"--production-shares", "0"}).find("--production-shares"), std::string::npos);
  EXPECT_NE(errors_of({"--no-such-flag"}).find("no-such-flag"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::deviceplugin
