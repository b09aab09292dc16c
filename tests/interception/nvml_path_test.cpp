// NVML's memory-info calls (what nvidia-smi inside a job reads) are hooked and counted, and in
// standalone mode (no daemon) answer exactly what the driver answers.
#include "client_harness.h"

namespace gpushare::testing {
namespace {

TEST_F(ClientTest, NvmlMemoryInfoIsCountedAndUnchanged) {
  ProcessResult with = run("client_nvml", {"--calls", "3"});
  ASSERT_EQ(with.exit_code, 0) << with.out << with.err;
  nlohmann::json rep = report();
  ASSERT_TRUE(rep.is_object()) << with.err;
  EXPECT_EQ(rep["calls"]["nvmlDeviceGetMemoryInfo"].get<int>(), 3);
  EXPECT_EQ(rep["calls"]["nvmlDeviceGetMemoryInfo_v2"].get<int>(), 3);
  EXPECT_EQ(rep["failed_calls"]["nvmlDeviceGetMemoryInfo"].get<int>(), 0);
  EXPECT_EQ(rep["failed_calls"]["nvmlDeviceGetMemoryInfo_v2"].get<int>(), 0);
  EXPECT_EQ(rep["interception"]["dlsym_substitutions"].get<int>(), 2);

  ProcessResult without = run("client_nvml", {"--calls", "3"}, false);
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(output_of(with), output_of(without));
  EXPECT_EQ(output_of(with)["memory"]["total"].get<uint64_t>(), 16ull << 30)
      << "the fake's default capacity";
}
}  // namespace
}  // namespace gpushare::testing
