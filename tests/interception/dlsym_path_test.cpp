// The dlsym path: dlsym on the driver's handle, RTLD_DEFAULT and
// RTLD_NEXT must hand back the shim's wrappers for hooked names, and exactly what they answer
// without the shim for everything else.
#include "client_harness.h"

namespace gpushare::testing {
namespace {

constexpr int kHookedEntryPoints = 17;  // hooked DriverApi fields the client looks up

class DlsymPath : public ClientTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(DlsymPath, CountsEverySymbolAndLeavesOtherNamesAlone) {
  const std::string mode = GetParam();
  ExerciseRun run;
  run.launches = 4;
  std::vector<std::string> args = run.args();
  args.insert(args.end(), {"--mode", mode});

  ProcessResult with = this->run("client_dlsym", args, true);
  ASSERT_EQ(with.exit_code, 0) << with.out << with.err;
  nlohmann::json client = output_of(with), rep = report();
  ASSERT_TRUE(rep.is_object()) << "no report\n" << with.err;
  expect_exercise_report(rep, client, run);
  expect_resolved_to_shim(client, run);
  if (mode == "handle") {
    EXPECT_EQ(rep["interception"]["dlsym_substitutions"].get<int>(), kHookedEntryPoints);
  }

  // Names the shim does not hook resolve exactly as without it (same object, symbol, offset);
  // misspelt or unversioned hooked names stay unresolved.
  ProcessResult without = this->run("client_dlsym", args, false);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const nlohmann::json& ours = client["non_hooked"];
  const nlohmann::json plain = output_of(without)["non_hooked"];
  EXPECT_EQ(ours, plain);
  EXPECT_EQ(ours["cuCtxSynchronize"].value("object", ""), "libcuda.so.1");
  EXPECT_EQ(ours["getpid_next"].value("object", ""), "libc.so.6");
  EXPECT_TRUE(ours["cuLaunchKernel_ptszX"].is_null());
  EXPECT_TRUE(ours["cuMemAlloc"].is_null());
  EXPECT_TRUE(ours["cuGpushareNoSuchSymbol"].is_null());
}

INSTANTIATE_TEST_SUITE_P(Handles, DlsymPath, ::testing::Values("handle", "default", "next"));

TEST_F(ClientTest, DlsymPerThreadSymbolsOnTheHandle) {
  ExerciseRun run;
  run.per_thread = true;
  std::vector<std::string> args = run.args();
  args.insert(args.end(), {"--mode", "handle"});
  ProcessResult r = this->run("client_dlsym", args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json client = output_of(r);
  expect_exercise_report(report(), client, run);
  expect_resolved_to_shim(client, run);
}
}  // namespace
}  // namespace gpushare::testing
