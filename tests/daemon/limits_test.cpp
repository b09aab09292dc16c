// The hardening's pure pieces: the connection limits, the log rate limit, quoting of client-chosen log
// fields, and production rules that trust a job name only with a uid or gid.
#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "authorization.h"
#include "config.h"
#include "connection_limits.h"
#include "log_limiter.h"
#include "logging.h"

namespace gpushare::daemon {
namespace {

using namespace std::chrono_literals;

TEST(ConnectionLimits, DerivedFromMaxClients) {
  ConnectionLimits l = ConnectionLimits::for_max_clients(1024);
  EXPECT_EQ(l.total, 1024u);
  EXPECT_EQ(l.reserved_for_admin, 16u);
  EXPECT_EQ(l.per_uid, 252u);
  EXPECT_EQ(l.unregistered, 252u);
  EXPECT_EQ(l.unregistered_per_uid, 31u);
  ConnectionLimits tiny = ConnectionLimits::for_max_clients(2);
  EXPECT_EQ(tiny.reserved_for_admin, 0u);
  EXPECT_GE(tiny.per_uid, 1u);
  EXPECT_LE(tiny.unregistered_per_uid, tiny.per_uid);
}

TEST(ConnectionLimits, OneUserGetsItsShareAndRootTheLastSlots) {
  ConnectionLimits l = ConnectionLimits::for_max_clients(64);  // 4 kept, 15 per uid, 4 unregistered
  ConnectionCounts c;
  EXPECT_FALSE(refuse_connection(l, c, false));
  c.of_uid = 15;
  EXPECT_TRUE(refuse_connection(l, c, false));
  EXPECT_FALSE(refuse_connection(l, c, true));  // root and the admin group: only the table's size
  c = {};
  c.unregistered_of_uid = 4;
  EXPECT_TRUE(refuse_connection(l, c, false));
  c = {};
  c.unregistered = 15;
  EXPECT_TRUE(refuse_connection(l, c, false));
  c = {};
  c.total = 60;  // the last 4 are kept
  EXPECT_NE(refuse_connection(l, c, false).value_or("").find("kept for root"), std::string::npos);
  EXPECT_FALSE(refuse_connection(l, c, true));
  c.total = 64;
  EXPECT_TRUE(refuse_connection(l, c, true));
}

TEST(LogLimiter, WritesABurstThenCountsThenSummarisesOncePerWindow) {
  LogLimiter limiter(3, 10s);
  LogLimiter::Clock::time_point t0{};
  int written = 0;
  for (int i = 0; i < 10; ++i) written += limiter.admit("uid=1000 drop: bad frame", t0 + 1ms * i);
  EXPECT_EQ(written, 3);
  EXPECT_TRUE(limiter.admit("uid=1001 drop: bad frame", t0));  // another client: its own budget
  std::map<std::string, uint64_t> summaries;
  auto collect = [&](const std::string& key, uint64_t n) { summaries[key] += n; };
  limiter.flush(t0 + 5s, collect);
  EXPECT_TRUE(summaries.empty());  // the window is not over
  limiter.flush(t0 + 10s, collect);
  EXPECT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries["uid=1000 drop: bad frame"], 7u);
  EXPECT_EQ(limiter.keys(), 0u);
  EXPECT_TRUE(limiter.admit("uid=1000 drop: bad frame", t0 + 11s));  // a fresh window
}

TEST(LogLimiter, InventedKeysShareOneOnceTheTableIsFull) {
  LogLimiter limiter(1, 10s);
  LogLimiter::Clock::time_point t0{};
  for (size_t i = 0; i < LogLimiter::kMaxKeys + 100; ++i)
    limiter.admit("uid=" + std::to_string(i), t0);
  EXPECT_EQ(limiter.keys(), LogLimiter::kMaxKeys + 1);  // the overflow key
}

TEST(LogLimiter, ReasonKindDropsWhatVaries) {
  EXPECT_EQ(reason_kind("bad frame: bad magic (26 bytes, type 0)"), "bad frame: bad magic");
  EXPECT_EQ(reason_kind("declared memory on device 99"), "declared memory on device");
  EXPECT_EQ(reason_kind("over its limit of 1048576 bytes"), "over its limit of");
}

TEST(LogText, QuotesWhatCouldPassForFields) {
  EXPECT_EQ(log_text("train-b"), "train-b");
  EXPECT_EQ(log_text("a uid=0 class=production"), "\"a uid=0 class=production\"");
  EXPECT_EQ(log_text("x=1"), "\"x=1\"");
  EXPECT_EQ(log_text("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(log_text("bell\x07"), "\"bell\\x07\"");
  EXPECT_EQ(log_text(""), "\"\"");
}

TEST(ProductionRules, ANameAloneMatchesNobodyAndIsWarnedOf) {
  ConfigResult r = parse_config(
      R"({"production": [{"job": "serve-*"}, {"uid": 1000, "job": "train-*"}, {"gid": 5}]})");
  ASSERT_TRUE(r.config) << r.error_text();
  Peer anyone{1, 2000, 2000, {}, {}};
  Peer owner{1, 1000, 1000, {}, {}};
  EXPECT_EQ(production_rule_for(*r.config, anyone, "serve-a"), nullptr);
  EXPECT_NE(production_rule_for(*r.config, owner, "train-a"), nullptr);
  EXPECT_EQ(production_rule_for(*r.config, anyone, "train-a"), nullptr);
  std::vector<std::string> warnings = config_warnings(*r.config);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("production[0]"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace gpushare::daemon
