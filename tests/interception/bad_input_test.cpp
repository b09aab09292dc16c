// Bad input: programs without CUDA, machines without libcuda.so.1 and malformed
// GPUSHARE_* variables run unchanged under the shim.
#include <fstream>

#include "client_harness.h"
#include "shim_preload.h"

namespace gpushare::testing {
namespace {

class BadInput : public ClientTest {
 protected:
  // Runs a client with and without the shim, in the same environment otherwise.
  void expect_unchanged(const std::string& client, const std::vector<std::string>& args,
                        const Env& extra) {
    Env plain = extra, shimmed = extra;
    shimmed["LD_PRELOAD"] = shim_preload(kShim);
    std::vector<std::string> argv{client_path(client)};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult without = run_process(argv, plain);
    ProcessResult with = run_process(argv, shimmed);
    EXPECT_EQ(with.exit_code, without.exit_code);
    EXPECT_EQ(with.signal, 0);
    EXPECT_EQ(with.out, without.out);
    EXPECT_EQ(with.err, without.err);
  }
};

TEST_F(BadInput, ProgramWithoutCudaRunsUnchanged) {
  expect_unchanged("client_nocuda", {"3"}, {});
  // Also with the shim's own variables set: still nothing on stdout/stderr from the shim.
  expect_unchanged("client_nocuda", {"0"},
                   {{"GPUSHARE_REPORT", report_path()}, {"GPUSHARE_SOCKET", dir_.file("s")}});
}

// A wrapper that never calls CUDA (`timeout`, a launcher) exits after the job it ran: it must not
// replace that job's report with zeros.
TEST_F(BadInput, ProgramWithoutCudaLeavesTheReportAlone) {
  {
    std::ofstream job_report(report_path());
    job_report << R"({"written by": "the job"})";
  }
  ProcessResult r = run("client_nocuda", {"0"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(read_file(report_path()), R"({"written by": "the job"})");
  EXPECT_FALSE(file_exists(report_path() + ".tmp"));
}

TEST_F(BadInput, MachineWithoutLibcudaRunsUnchanged) {
  // No LD_LIBRARY_PATH to the fake: dlopen("libcuda.so.1") fails as on a machine without a driver.
  ProcessResult plain = run_process({client_path("client_optional_cuda")}, {});
  ASSERT_NE(plain.out.find("not found"), std::string::npos)
      << "this machine has a real libcuda.so.1; the test needs one without";
  expect_unchanged("client_optional_cuda", {}, {});
}

TEST_F(BadInput, ExecOfAProgramWithoutCudaRunsUnchanged) {
  expect_unchanged("client_exec", {client_path("client_nocuda"), "4"}, {});
}

// Each malformed or unknown variable gives exactly one warning naming it; the run goes on with
// the defaults and its counts are intact.
TEST_F(BadInput, MalformedVariablesWarnOnceAndUseDefaults) {
  ExerciseRun run;
  run.proc_address_v2 = 41;
  run.proc_address_v2_failed = 1;
  ProcessResult r = this->run("client_cudart", run.args(), true,
                              {{"GPUSHARE_PRIORITY", "urgent"},
                               {"GPUSHARE_REQUIRE_DAEMON", "maybe"},
                               {"GPUSHARE_PRIORITTY", "production"}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // (The unknown-variable warning lists the known names, so lines are matched by bad value.)
  EXPECT_EQ(count_lines_containing(r.err, "urgent"), 1) << r.err;
  EXPECT_NE(r.err.find("GPUSHARE_PRIORITY='urgent'"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines_containing(r.err, "maybe"), 1) << r.err;
  EXPECT_NE(r.err.find("GPUSHARE_REQUIRE_DAEMON='maybe'"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines_containing(r.err, "GPUSHARE_PRIORITTY"), 1) << r.err;
  nlohmann::json rep = report();
  ASSERT_TRUE(rep.is_object()) << r.err;
  EXPECT_EQ(rep["daemon"].value("job_class", ""), "opportunistic");
  expect_exercise_report(rep, output_of(r), run);
}
}  // namespace
}  // namespace gpushare::testing
