// Threads, fork and exec: the shim's counters lose nothing under concurrency, a fork child
// counts only its own work (in <report>.<pid>), and a shim preloaded across exec works again.
#include "client_harness.h"

namespace gpushare::testing {
namespace {

constexpr long kParentBytes = 1 << 20, kChildBytes = 2 << 20;  // tests/clients/client_fork.cpp

long calls(const nlohmann::json& report, const char* symbol) {
  return report["calls"][symbol].get<long>();
}

class Threads : public ClientTest, public ::testing::WithParamInterface<bool> {};

TEST_P(Threads, CountEveryLaunchAndAllocation) {
  const bool per_thread = GetParam();
  const long threads = 8, launches = 2000, allocs = 500;
  std::vector<std::string> args{"--threads",  std::to_string(threads),
                                "--launches", std::to_string(launches),
                                "--allocs",   std::to_string(allocs)};
  if (per_thread) args.push_back("--ptds");
  ProcessResult r = run("client_threads", args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json rep = report();
  ASSERT_TRUE(rep.is_object()) << r.err;
  const char* launch = per_thread ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
  EXPECT_EQ(calls(rep, launch), threads * launches);
  EXPECT_EQ(rep["launches"]["by_entry_point"][launch].get<long>(), threads * launches);
  EXPECT_EQ(rep["launches"]["total"].get<long>(), threads * launches);
  EXPECT_EQ(calls(rep, "cuMemAlloc_v2"), threads * allocs);
  EXPECT_EQ(calls(rep, "cuMemFree_v2"), threads * allocs);
  EXPECT_EQ(rep["allocations"]["count"].get<long>(), threads * allocs);
  EXPECT_EQ(rep["allocations"]["frees"].get<long>(), threads * allocs);
  EXPECT_EQ(rep["allocations"]["unknown_frees"].get<long>(), 0);
  ASSERT_EQ(rep["memory"].size(), 1u);
  EXPECT_EQ(rep["memory"][0]["live_bytes"].get<long>(), 0);
  EXPECT_GE(rep["memory"][0]["peak_bytes"].get<long>(), 65536);
  EXPECT_LE(rep["memory"][0]["peak_bytes"].get<long>(), threads * 65536);
}

INSTANTIATE_TEST_SUITE_P(Streams, Threads, ::testing::Values(false, true));

class Fork : public ClientTest, public ::testing::WithParamInterface<bool> {};

TEST_P(Fork, ParentAndChildEachCountTheirOwnWork) {
  const bool before_init = GetParam();
  std::vector<std::string> args{"--before", "10", "--child", "7", "--after", "5"};
  if (before_init) args.push_back("--fork-before-init");
  ProcessResult r = run("client_fork", args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json out = output_of(r);
  ASSERT_EQ(out.value("child_exit", -1), 0) << r.out;

  nlohmann::json parent = report();
  ASSERT_TRUE(parent.is_object()) << r.err;
  EXPECT_EQ(calls(parent, "cuInit"), 1);
  EXPECT_EQ(calls(parent, "cuLaunchKernel"), 15);
  EXPECT_EQ(parent["launches"]["total"].get<long>(), 15);
  EXPECT_EQ(parent["allocations"]["count"].get<long>(), 1);
  ASSERT_EQ(parent["memory"].size(), 1u);
  EXPECT_EQ(parent["memory"][0]["live_bytes"].get<long>(), kParentBytes);

  const std::string child_path = report_path() + "." + std::to_string(out["child_pid"].get<int>());
  nlohmann::json child = report(child_path);
  ASSERT_TRUE(child.is_object()) << "no child report at " << child_path << "\n" << r.err;
  EXPECT_EQ(child["pid"].get<int>(), out["child_pid"].get<int>());
  // A child forked after init inherits the initialised driver and never calls cuInit.
  EXPECT_EQ(calls(child, "cuInit"), before_init ? 1 : 0);
  EXPECT_EQ(calls(child, "cuLaunchKernel"), 7);
  EXPECT_EQ(child["launches"]["total"].get<long>(), 7);
  EXPECT_EQ(child["allocations"]["count"].get<long>(), 1);
  ASSERT_EQ(child["memory"].size(), 1u);
  EXPECT_EQ(child["memory"][0]["live_bytes"].get<long>(), kChildBytes);
}

INSTANTIATE_TEST_SUITE_P(InitOrder, Fork, ::testing::Values(false, true));

class Exec : public ClientTest, public ::testing::WithParamInterface<bool> {};

// The first image never exits normally (exec replaces it), so the report is the new image's.
TEST_P(Exec, ShimWorksInTheNewImage) {
  const bool init_first = GetParam();
  ExerciseRun run;
  run.proc_address_v2 = 41;
  run.proc_address_v2_failed = 1;
  std::vector<std::string> args;
  if (init_first) args.push_back("--init-first");
  args.push_back(client_path("client_cudart"));
  for (const std::string& a : run.args()) args.push_back(a);
  ProcessResult r = this->run("client_exec", args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json client = output_of(r), rep = report();
  ASSERT_TRUE(rep.is_object()) << r.err;
  EXPECT_EQ(rep.value("program", ""), "client_cudart");
  expect_exercise_report(rep, client, run);
  expect_resolved_to_shim(client, run);
}

INSTANTIATE_TEST_SUITE_P(InitFirst, Exec, ::testing::Values(false, true));
}  // namespace
}  // namespace gpushare::testing
