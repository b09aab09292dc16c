// The cudart path: dlopen + dlsym("cuGetProcAddress_v2") + self-lookup +
// everything through the returned pointer, with and without per-thread default streams.
#include "client_harness.h"

namespace gpushare::testing {
namespace {

// The client resolves 40 entry points through the self-lookup's answer, plus one unknown name.
constexpr int kResolvedEntryPoints = 40;
// Of those, the hooked ones (tests/interception/exercise_expectations.cpp), plus the self-lookup.
constexpr int kHookedEntryPoints = 17;

class CudartPath : public ClientTest {
 protected:
  void check(ExerciseRun run, const std::vector<std::string>& extra_args = {},
             const Env& extra_env = {}) {
    std::vector<std::string> args = run.args();
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    ProcessResult r = this->run("client_cudart", args, true, extra_env);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    nlohmann::json client = output_of(r), rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report at " << report_path() << "\n" << r.err;
    expect_exercise_report(rep, client, run);
    expect_resolved_to_shim(client, run);
    EXPECT_EQ(rep["interception"]["proc_address_substitutions"].get<int>(), kHookedEntryPoints + 1);
    EXPECT_EQ(rep["interception"]["dlsym_substitutions"].get<int>(), 1)
        << "dlsym(handle, \"cuGetProcAddress[_v2]\") must hand back the shim's wrapper";
  }
};

TEST_F(CudartPath, DefaultStreamCountsEverySymbol) {
  ExerciseRun run;
  run.launches = 5;
  run.graph_nodes = 3;
  run.alloc_rounds = 3;
  run.info_calls = 4;
  run.proc_address_v2 = 1 + kResolvedEntryPoints;  // the dlsym'd pointer once, then the self one
  run.proc_address_v2_failed = 1;                  // the unknown name
  check(run);
}

TEST_F(CudartPath, PerThreadDefaultStreamGetsPtszWrappers) {
  ExerciseRun run;
  run.launches = 4;
  run.per_thread = true;
  run.proc_address_v2 = 1 + kResolvedEntryPoints;
  run.proc_address_v2_failed = 1;
  check(run);
}

// A CUDA 11 cudart dlsyms the old cuGetProcAddress, gets it back from its self-lookup and
// resolves everything through that one.
TEST_F(CudartPath, CudaElevenUsesTheOldGetProcAddress) {
  ExerciseRun run;
  run.proc_address_v1 = 1 + kResolvedEntryPoints;
  run.proc_address_v1_failed = 1;
  check(run, {"--cuda-version", "11080"});
}

// Two devices: a multi-device cooperative launch counts once per device, and memory is
// reported for the device it was allocated on.
TEST_F(CudartPath, TwoDevicesCountMultiDeviceLaunchesAndMemoryPerDevice) {
  ExerciseRun run;
  run.devices = 2;
  run.alloc_device = 1;
  run.proc_address_v2 = 1 + kResolvedEntryPoints;
  run.proc_address_v2_failed = 1;
  check(run, {}, {{"GPUSHARE_FAKE_DEVICES", "2"}});
}

// With and without the shim the program sees the same answers (free memory included: the first
// run's process is gone and its memory reclaimed), only the addresses of hooked entry points
// differ.
TEST_F(CudartPath, OutputMatchesARunWithoutTheShim) {
  ExerciseRun run;
  ProcessResult with = this->run("client_cudart", run.args(), true);
  ProcessResult without = this->run("client_cudart", run.args(), false);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  nlohmann::json a = output_of(with), b = output_of(without);
  a.erase("resolved");
  b.erase("resolved");
  EXPECT_EQ(a, b);
}
}  // namespace
}  // namespace gpushare::testing
