// `gpusharectl record`'s timeline (tools/ctl/timeline.cpp) from made-up samples: the trace-event
// format Perfetto and chrome://tracing read, one track per job, and the events the samples imply.
#include "timeline.h"

#include <gtest/gtest.h>

namespace gpushare::ctl {
namespace {

using nlohmann::json;

json job(int pid, const std::string& name, const std::string& job_class, uint64_t launches,
         bool paused, uint64_t bytes, const std::string& memory_state = "resident",
         uint64_t on_host = 0) {
  return {{"pid", pid},
          {"job", name},
          {"class", job_class},
          {"launches", launches},
          {"memory_bytes", bytes},
          {"gate", {{"paused", paused}}},
          {"memory_state", {{"state", memory_state}, {"on_host_bytes", on_host}}}};
}

std::vector<Sample> samples() {
  json none = json::array({{{"device", 0}, {"policy", "none"}}});
  json tgs = json::array({{{"device", 0}, {"policy", "tgs"}, {"parameters", {{"target", 0.9}}}}});
  return {
      {0.0,
       {job(10, "serve", "production", 0, false, 0),
        job(11, "train", "opportunistic", 0, false, 1 << 20)},
       none},
      {0.5,
       {job(10, "serve", "production", 500, false, 1 << 20),
        job(11, "train", "opportunistic", 100, true, 1 << 20, "swapping-out")},
       tgs},
      {1.0,
       {job(10, "serve", "production", 1000, false, 1 << 20),
        job(11, "train", "production", 100, true, 1 << 20, "swapped-out", 1 << 20)},
       tgs},
      {1.5, {job(10, "serve", "production", 1500, false, 1 << 20)}, tgs},
  };
}

std::vector<json> events_named(const json& trace, const std::string& ph, int pid,
                               const std::string& name_prefix) {
  std::vector<json> found;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph && e["pid"] == pid && e["name"].get<std::string>().rfind(name_prefix, 0) == 0)
      found.push_back(e);
  return found;
}

TEST(Timeline, EveryEventHasTheFieldsViewersNeed) {
  json trace = build_trace(samples());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  for (const json& e : trace["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"))
        << e;
    std::string ph = e["ph"];
    ASSERT_TRUE(ph == "M" || ph == "C" || ph == "X" || ph == "i") << e;
    if (ph != "M") {
      EXPECT_TRUE(e["ts"].is_number()) << e;
    }
    if (ph == "X") {
      EXPECT_GT(e["dur"].get<double>(), 0) << e;
    }
    if (ph == "C") {
      EXPECT_TRUE(e["args"].is_object() && !e["args"].empty()) << e;
    }
  }
  // Round trip: what is written parses back.
  EXPECT_EQ(json::parse(trace.dump()), trace);
}

TEST(Timeline, OneTrackPerJobWithRateGateMemoryAndChanges) {
  json trace = build_trace(samples());
  // Track names.
  auto serve_name = events_named(trace, "M", 10, "process_name");
  ASSERT_FALSE(serve_name.empty());
  EXPECT_EQ(serve_name[0]["args"]["name"], "serve (pid 10)");
  // Launch rate: 500 launches per 0.5 s.
  auto rate = events_named(trace, "C", 10, "launches/s");
  ASSERT_EQ(rate.size(), 3u);
  EXPECT_DOUBLE_EQ(rate[0]["args"]["launches/s"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(rate[0]["ts"].get<double>(), 0.5e6);
  // Gate: train ran 0-0.5 s, was paused from 0.5 s until it left at 1.5 s.
  auto paused = events_named(trace, "X", 11, "paused");
  ASSERT_EQ(paused.size(), 2u);  // opportunistic, then production
  EXPECT_DOUBLE_EQ(paused[0]["ts"].get<double>(), 0.5e6);
  auto running = events_named(trace, "X", 11, "running");
  ASSERT_EQ(running.size(), 1u);
  EXPECT_DOUBLE_EQ(running[0]["dur"].get<double>(), 0.5e6);
  // Memory: admitted for serve; train swapped out, then on host; its host counter.
  auto admitted = events_named(trace, "i", 10, "admitted");
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0]["args"]["bytes"], 1 << 20);
  EXPECT_EQ(events_named(trace, "X", 11, "swapping out").size(), 1u);
  EXPECT_EQ(events_named(trace, "X", 11, "on host").size(), 1u);
  bool host_counter = false;
  for (const json& c : events_named(trace, "C", 11, "memory"))
    host_counter = host_counter || c["args"]["host"].get<double>() == 1.0;
  EXPECT_TRUE(host_counter);
  // Class and policy changes, and the job leaving.
  EXPECT_EQ(events_named(trace, "i", 11, "class opportunistic -> production").size(), 1u);
  EXPECT_EQ(events_named(trace, "i", 11, "left").size(), 1u);
  auto policy = events_named(trace, "i", 0, "policy none -> tgs");
  ASSERT_EQ(policy.size(), 1u);
  EXPECT_DOUBLE_EQ(policy[0]["ts"].get<double>(), 0.5e6);
}

TEST(Timeline, NoSamplesGiveAnEmptyButValidTrace) {
  json trace = build_trace({});
  EXPECT_TRUE(trace["traceEvents"].is_array());
}

}  // namespace
}  // namespace gpushare::ctl
