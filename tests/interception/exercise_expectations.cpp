// What the shim's report must say after a run of the exercise (tests/clients/exercise.cpp),
// computed from the run's options alone, for every symbol of the hook table.
#include <map>

#include "client_harness.h"
#include "hooks.h"

namespace gpushare::testing {
namespace {

using gpushare::shim::Family;
using gpushare::shim::kHooks;

// Exercise entry points that are hooked: DriverApi field -> exported symbol (default, per-thread).
struct HookedField {
  const char* field;
  const char* symbol;
  const char* per_thread_symbol;
};
constexpr HookedField kHookedFields[] = {
    {"init", "cuInit", "cuInit"},
    {"launch_kernel", "cuLaunchKernel", "cuLaunchKernel_ptsz"},
    {"launch_kernel_ex", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz"},
    {"launch_cooperative", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz"},
    {"launch_cooperative_multi", "cuLaunchCooperativeKernelMultiDevice",
     "cuLaunchCooperativeKernelMultiDevice"},
    {"graph_launch", "cuGraphLaunch", "cuGraphLaunch_ptsz"},
    {"mem_alloc", "cuMemAlloc_v2", "cuMemAlloc_v2"},
    {"mem_alloc_pitch", "cuMemAllocPitch_v2", "cuMemAllocPitch_v2"},
    {"mem_alloc_managed", "cuMemAllocManaged", "cuMemAllocManaged"},
    {"mem_alloc_async", "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
    {"mem_alloc_from_pool_async", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
    {"mem_create", "cuMemCreate", "cuMemCreate"},
    {"mem_free", "cuMemFree_v2", "cuMemFree_v2"},
    {"mem_free_async", "cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
    {"mem_release", "cuMemRelease", "cuMemRelease"},
    {"mem_get_info", "cuMemGetInfo_v2", "cuMemGetInfo_v2"},
    {"device_total_mem", "cuDeviceTotalMem_v2", "cuDeviceTotalMem_v2"},
};

const char* symbol_for(const HookedField& f, const ExerciseRun& run) {
  return run.per_thread ? f.per_thread_symbol : f.symbol;
}

// Successful calls of each exercise field (tests/clients/exercise.cpp).
std::map<std::string, long> expected_field_calls(const ExerciseRun& r) {
  const long n = r.launches, a = r.alloc_rounds, freed = a > 0 ? a - 1 : 0, i = r.info_calls;
  const long extra = a > 0 ? 1 : 0;  // the allocation made and freed for the peak
  return {{"init", 1},
          {"launch_kernel", n},
          {"launch_kernel_ex", n},
          {"launch_cooperative", n},
          {"launch_cooperative_multi", n},
          {"graph_launch", n},
          {"mem_alloc", a + extra},
          {"mem_alloc_pitch", a},
          {"mem_alloc_managed", a},
          {"mem_alloc_async", a},
          {"mem_alloc_from_pool_async", a},
          {"mem_create", a},
          {"mem_free", 3 * freed + extra + 1},  // + cuMemFree(0)
          {"mem_free_async", 2 * freed},
          {"mem_release", freed},
          {"mem_get_info", i},
          {"device_total_mem", i}};
}

long count_of(const nlohmann::json& object, const std::string& key) {
  return object.is_object() && object.contains(key) ? object[key].get<long>() : 0;
}
}  // namespace

std::vector<std::string> ExerciseRun::args() const {
  std::vector<std::string> a{
      "--launches",     std::to_string(launches),     "--graph-nodes", std::to_string(graph_nodes),
      "--alloc-rounds", std::to_string(alloc_rounds), "--info-calls",  std::to_string(info_calls),
      "--alloc-device", std::to_string(alloc_device)};
  if (per_thread) a.push_back("--ptds");
  return a;
}

void expect_exercise_report(const nlohmann::json& report, const nlohmann::json& client,
                            const ExerciseRun& run) {
  ASSERT_TRUE(report.is_object()) << "no report";
  ASSERT_TRUE(client.is_object() && !client.contains("error")) << client.dump();

  // calls and failed_calls: every hooked symbol, zeros included.
  std::map<std::string, long> calls, failed;
  for (const auto& hook : kHooks) calls[hook.name] = failed[hook.name] = 0;
  const auto field_calls = expected_field_calls(run);
  for (const HookedField& f : kHookedFields) calls[symbol_for(f, run)] += field_calls.at(f.field);
  calls["cuGetProcAddress_v2"] += run.proc_address_v2;
  calls["cuGetProcAddress"] += run.proc_address_v1;
  failed[run.per_thread ? "cuLaunchKernel_ptsz" : "cuLaunchKernel"] = 1;  // a grid of 0 blocks
  failed["cuMemAlloc_v2"] = 1;                                            // 0 bytes
  failed["cuGetProcAddress_v2"] += run.proc_address_v2_failed;
  failed["cuGetProcAddress"] += run.proc_address_v1_failed;
  for (const auto& hook : kHooks) {
    SCOPED_TRACE(hook.name);
    ASSERT_TRUE(report["calls"].contains(hook.name)) << "calls lacks " << hook.name;
    ASSERT_TRUE(report["failed_calls"].contains(hook.name)) << "failed_calls lacks " << hook.name;
    EXPECT_EQ(report["calls"][hook.name].get<long>(), calls[hook.name]) << "calls." << hook.name;
    EXPECT_EQ(report["failed_calls"][hook.name].get<long>(), failed[hook.name])
        << "failed_calls." << hook.name;
  }
  EXPECT_EQ(report["calls"].size(), std::size(kHooks)) << "calls has symbols outside the table";

  // launches: by_entry_point counts successful calls; in total, a multi-device cooperative
  // launch counts one launch per device (docs/report.md). Graph launches apart.
  long total = 0, graph_total = 0;
  for (const auto& hook : kHooks) {
    const bool graph = hook.family == Family::graph_launch;
    if (hook.family != Family::launch && hook.family != Family::launch_multi && !graph) continue;
    const nlohmann::json& group = graph ? report["graph_launches"] : report["launches"];
    EXPECT_EQ(count_of(group["by_entry_point"], hook.name), calls[hook.name])
        << "by_entry_point of " << hook.name;
    const long kernels =
        hook.family == Family::launch_multi ? calls[hook.name] * run.devices : calls[hook.name];
    (graph ? graph_total : total) += kernels;
  }
  EXPECT_EQ(report["launches"]["total"].get<long>(), total);
  EXPECT_EQ(report["graph_launches"]["total"].get<long>(), graph_total);

  // allocations and memory.
  const long a = run.alloc_rounds, freed = a > 0 ? a - 1 : 0, extra = a > 0 ? 1 : 0;
  EXPECT_EQ(report["allocations"]["count"].get<long>(), 6 * a + extra);
  EXPECT_EQ(report["allocations"]["frees"].get<long>(), 6 * freed + extra);
  EXPECT_EQ(report["allocations"]["unknown_frees"].get<long>(), 0);
  const uint64_t pitch = client.value("pitch", 0ull);
  EXPECT_EQ(pitch, 1024u) << "the fake rounds a 1000-byte row to 512-byte multiples";
  const uint64_t round =
      (1ull << 20) + pitch * 10 + (3ull << 20) + (4ull << 20) + (5ull << 20) + (2ull << 20);
  const uint64_t live = a > 0 ? round : 0, peak = a > 0 ? round + (8ull << 20) : 0;
  ASSERT_EQ(report["memory"].size(), a > 0 ? 1u : 0u) << report["memory"].dump();
  if (a > 0) {
    EXPECT_EQ(report["memory"][0]["device"].get<int>(), run.alloc_device);
    EXPECT_EQ(report["memory"][0]["live_bytes"].get<uint64_t>(), live);
    EXPECT_EQ(report["memory"][0]["peak_bytes"].get<uint64_t>(), peak);
  }
  EXPECT_EQ(report["interception"]["proc_address_unmatched"].get<long>(), 0);

  // The client's own tally agrees (it counts what the driver answered, shim or not).
  for (const auto& [field, n] : field_calls) {
    EXPECT_EQ(count_of(client["calls"], field), n) << "client calls." << field;
  }
  EXPECT_EQ(client.value("live_bytes", 0ull), live);
  EXPECT_EQ(client.value("peak_bytes", 0ull), peak);
  EXPECT_TRUE(client.value("data_ok", false));
}

void expect_resolved_to_shim(const nlohmann::json& client, const ExerciseRun& run) {
  for (const HookedField& f : kHookedFields) {
    const nlohmann::json& where = client["resolved"][f.field];
    EXPECT_EQ(where.value("object", ""), "libgpushare.so") << f.field << ": " << where.dump();
    EXPECT_EQ(where.value("symbol", ""), symbol_for(f, run)) << f.field;
  }
  // Entry points the shim does not hook stay the driver's own.
  for (const char* field : {"ctx_set_current", "module_get_function", "memcpy_htod"}) {
    EXPECT_EQ(client["resolved"][field].value("object", ""), "libcuda.so.1") << field;
  }
}
}  // namespace gpushare::testing
