// The shim's GPUSHARE_* parser: every malformed value gives one warning that names it, and the
// default; unknown GPUSHARE_* names (typos) give one warning too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "settings.h"

namespace gpushare::shim {
namespace {

std::vector<std::string> g_warnings;
void collect(const char* message) { g_warnings.emplace_back(message); }

Settings parse(std::vector<const char*> env) {
  g_warnings.clear();
  env.push_back(nullptr);
  return parse_settings(env.data(), "train.py", collect);
}

TEST(Settings, DefaultsWhenUnset) {
  Settings s = parse({"PATH=/usr/bin", "HOME=/root"});
  EXPECT_TRUE(g_warnings.empty());
  EXPECT_EQ(s.job_name, "train.py");
  EXPECT_FALSE(s.production);
  EXPECT_FALSE(s.require_daemon);
  EXPECT_EQ(s.socket_path, "/run/gpushare/gpushared.sock");
  EXPECT_EQ(s.report_path, "");
}

TEST(Settings, ValidValues) {
  Settings s = parse({"GPUSHARE_PRIORITY=production", "GPUSHARE_JOB=resnet", "GPUSHARE_SOCKET=/tmp/s",
                      "GPUSHARE_REQUIRE_DAEMON=1", "GPUSHARE_TRACE_ALLOC=true",
                      "GPUSHARE_REPORT=/tmp/r-%p.json", "GPUSHARE_QUIET=yes"});
  EXPECT_TRUE(g_warnings.empty());
  EXPECT_TRUE(s.production);
  EXPECT_EQ(s.job_name, "resnet");
  EXPECT_EQ(s.socket_path, "/tmp/s");
  EXPECT_TRUE(s.require_daemon);
  EXPECT_TRUE(s.trace_alloc);
  EXPECT_TRUE(s.quiet);
  EXPECT_EQ(s.report_path, "/tmp/r-%p.json");
}

TEST(Settings, EachMalformedValueWarnsOnceAndKeepsTheDefault) {
  Settings s = parse({"GPUSHARE_PRIORITY=urgent", "GPUSHARE_SOCKET=relative/path",
                      "GPUSHARE_REQUIRE_DAEMON=maybe", "GPUSHARE_JOB=", "GPUSHARE_REPORT="});
  ASSERT_EQ(g_warnings.size(), 5u);
  EXPECT_NE(g_warnings[0].find("GPUSHARE_PRIORITY='urgent'"), std::string::npos);
  EXPECT_NE(g_warnings[1].find("GPUSHARE_SOCKET='relative/path'"), std::string::npos);
  EXPECT_NE(g_warnings[2].find("GPUSHARE_REQUIRE_DAEMON='maybe'"), std::string::npos);
  EXPECT_NE(g_warnings[3].find("GPUSHARE_JOB"), std::string::npos);
  EXPECT_NE(g_warnings[4].find("GPUSHARE_REPORT"), std::string::npos);
  EXPECT_FALSE(s.production);
  EXPECT_FALSE(s.require_daemon);
  EXPECT_EQ(s.socket_path, "/run/gpushare/gpushared.sock");
  EXPECT_EQ(s.job_name, "train.py");
}

TEST(Settings, UnknownNameIsATypoWarning) {
  parse({"GPUSHARE_PRIORTY=production"});
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("unknown variable GPUSHARE_PRIORTY"), std::string::npos);
}

TEST(Settings, FakeDriverVariablesAreNotTheShims) {
  parse({"GPUSHARE_FAKE_MEMORY=1024"});
  EXPECT_TRUE(g_warnings.empty());
}

TEST(Settings, OverlongSocketPathIsRefused) {
  std::string path = "GPUSHARE_SOCKET=/" + std::string(120, 'a');
  Settings s = parse({path.c_str()});
  EXPECT_EQ(g_warnings.size(), 1u);
  EXPECT_EQ(s.socket_path, "/run/gpushare/gpushared.sock");
}

}  // namespace
}  // namespace gpushare::shim
