// The -lcuda path: the dynamic linker binds the program's references to
// the shim's exported wrappers by name, including the _ptsz variants and cuGetProcAddress itself.
#include "client_harness.h"

namespace gpushare::testing {
namespace {

class LinkedPath : public ClientTest {
 protected:
  void check(const ExerciseRun& run) {
    ProcessResult r = this->run("client_linked", run.args());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    nlohmann::json client = output_of(r), rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report\n" << r.err;
    expect_exercise_report(rep, client, run);
    expect_resolved_to_shim(client, run);
    // The program called cuGetProcAddress_v2 and cuGetProcAddress by name for "cuMemAlloc":
    // both answers must be the shim's cuMemAlloc_v2 wrapper.
    for (const char* version : {"v1", "v2"}) {
      const nlohmann::json& probe = client["probe"][version];
      EXPECT_EQ(probe.value("result", -1), 0) << version;
      EXPECT_EQ(probe.value("symbol", ""), "cuMemAlloc_v2") << version;
      EXPECT_EQ(probe.value("object", ""), "libgpushare.so") << version;
    }
    EXPECT_EQ(client["probe"]["v2"].value("status", -1), 0) << "symbolStatus must stay SUCCESS";
    EXPECT_EQ(rep["interception"]["proc_address_substitutions"].get<int>(), 2);
    EXPECT_EQ(rep["interception"]["dlsym_substitutions"].get<int>(), 0);
  }
};

TEST_F(LinkedPath, DefaultStreamCountsEverySymbol) {
  ExerciseRun run;
  run.launches = 6;
  run.alloc_rounds = 3;
  run.proc_address_v2 = 1;
  run.proc_address_v1 = 1;
  check(run);
}

TEST_F(LinkedPath, PerThreadSymbolsCountUnderTheirOwnNames) {
  ExerciseRun run;
  run.per_thread = true;
  run.proc_address_v2 = 1;
  run.proc_address_v1 = 1;
  check(run);
}
}  // namespace
}  // namespace gpushare::testing
