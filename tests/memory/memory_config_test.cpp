// The "memory" section of gpushared's configuration and the capacity it gives (docs/memory.md).
#include <gtest/gtest.h>

#include "config.h"
#include "memory_broker.h"

namespace gpushare::daemon {
namespace {

TEST(MemoryConfig, CapacityInBytesOrAsAFractionOrPhysicalLessTheReserve) {
  ConfigResult r = parse_config(R"({"memory": {"capacity": "16G", "reserve": "512M",
      "devices": {"1": 0.5}, "limits": {"train-*": 8589934592}, "swap_timeout_ms": 2000}})");
  ASSERT_TRUE(r.config) << r.error_text();
  const MemoryConfig& m = r.config->memory;
  MemoryBroker broker;
  EXPECT_EQ(broker.capacity(m, 0), 16ull << 30);
  EXPECT_EQ(broker.capacity(m, 1), std::nullopt) << "a fraction needs the physical size";
  broker.physical[1] = 80ull << 30;
  EXPECT_EQ(broker.capacity(m, 1), 40ull << 30);
  ASSERT_EQ(m.limits.size(), 1u);
  EXPECT_EQ(m.limits[0].bytes, 8ull << 30);
  EXPECT_EQ(m.swap_timeout.count(), 2000);

  ConfigResult defaults = parse_config(R"({"memory": {"reserve": "1G"}})");
  ASSERT_TRUE(defaults.config);
  EXPECT_EQ(broker.capacity(defaults.config->memory, 0), std::nullopt) << "nothing known yet";
  broker.physical[0] = 80ull << 30;
  EXPECT_EQ(broker.capacity(defaults.config->memory, 0), 79ull << 30);
}

TEST(MemoryConfig, MistakesAreNamed) {
  EXPECT_NE(parse_config(R"({"memory": {"capacity": 1.5}})").error_text().find("memory.capacity"),
            std::string::npos);
  EXPECT_NE(parse_config(R"({"memory": {"capacity": "16Q"}})").error_text().find("memory.capacity"),
            std::string::npos);
  EXPECT_NE(parse_config(R"({"memory": {"limit": {}}})").error_text().find("memory.limit"),
            std::string::npos);
  EXPECT_NE(
      parse_config(R"({"memory": {"devices": {"x": "1G"}}})").error_text().find("memory.devices.x"),
      std::string::npos);
  EXPECT_NE(parse_config(R"({"memory": {"swap_timeout_ms": 60000}})")
                .error_text()
                .find("swap_timeout_ms"),
            std::string::npos);
}

TEST(MemoryConfig, TheNvmlCheckKnobsHaveDefaultsAndNameTheirMistakes) {
  ConfigResult defaults = parse_config(R"({})");
  ASSERT_TRUE(defaults.config) << defaults.error_text();
  EXPECT_EQ(defaults.config->memory.nvml_sample.count(), 2000);
  EXPECT_EQ(defaults.config->memory.declaration_grace.count(), 30000);
  ConfigResult set =
      parse_config(R"({"memory": {"nvml_sample_ms": 0, "declaration_grace_ms": 5000}})");
  ASSERT_TRUE(set.config) << set.error_text();
  EXPECT_EQ(set.config->memory.nvml_sample.count(), 0) << "0: off";
  EXPECT_EQ(set.config->memory.declaration_grace.count(), 5000);
  for (const char* bad :
       {R"({"memory": {"nvml_sample_ms": 50}})", R"({"memory": {"nvml_sample_ms": "2s"}})",
        R"({"memory": {"nvml_sample_ms": -1}})"})
    EXPECT_NE(parse_config(bad).error_text().find("memory.nvml_sample_ms"), std::string::npos)
        << bad;
  for (const char* bad : {R"({"memory": {"declaration_grace_ms": 0}})",
                          R"({"memory": {"declaration_grace_ms": 1e9}})"})
    EXPECT_NE(parse_config(bad).error_text().find("memory.declaration_grace_ms"), std::string::npos)
        << bad;
}

}  // namespace
}  // namespace gpushare::daemon
