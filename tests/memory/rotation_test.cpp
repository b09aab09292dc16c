// Rotating residency (docs/memory.md): three opportunistic jobs of 40 MiB each on a device whose
// capacity (64 MiB) less production's 4 MiB holds one and a half of them. They take turns: each
// finishes its launches with every buffer bit-identical, production is never paused, the next
// job's prefetch starts before every switch (from the daemon's log, in its order, not from
// timings), and a job killed while its memory is on host leaves nothing in the books.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "rotation_fixture.h"

namespace gpushare::testing {
namespace {

// The log's rotation events: each switch's job must have had its prefetch started after the
// previous switch (or the start) and before this one. Returns the number of switches checked.
int expect_prefetch_before_every_switch(const std::string& log, size_t from) {
  std::istringstream lines(log);
  std::string line;
  std::regex switch_to(R"(rotation switch device=0 job=\S+ id=(\d+) after)");
  std::regex prefetch_of(R"(rotation prefetch job=\S+ id=(\d+) device=0 bytes=(\d+))");
  std::set<std::string> prefetched;  // since the last switch
  size_t offset = 0;
  int switches = 0;
  while (std::getline(lines, line)) {
    size_t at = offset;
    offset += line.size() + 1;
    std::smatch m;
    if (std::regex_search(line, m, prefetch_of)) {
      EXPECT_GT(std::stoull(m[2]), 0u) << line;
      prefetched.insert(m[1]);
    } else if (std::regex_search(line, m, switch_to)) {
      if (at >= from) {
        EXPECT_TRUE(prefetched.count(m[1]))
            << "switched to id=" << m[1] << " with no prefetch started before:\n"
            << line;
        ++switches;
      }
      prefetched.clear();
    } else if (line.find("rotation starts") != std::string::npos) {
      prefetched.clear();
    }
  }
  return switches;
}

TEST_F(Rotation, ThreeJobsTakeTurnsFinishBitIdenticalAndProductionIsNeverPaused) {
  // All three are set up; from here on, every switch is one of the steady rotation.
  const size_t from = daemon.log().size();
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json rotation = status.json["devices"][0]["rotation"];
  ASSERT_TRUE(rotation.is_object()) << status.out;
  EXPECT_EQ(rotation["order"].size(), 3u);
  EXPECT_EQ(rotation["budget_bytes"], kCapacity - kProductionBytes);
  CtlResult text = run_ctl(daemon.socket, {"status"});
  EXPECT_NE(text.out.find("rotation device 0: turn of job id "), std::string::npos) << text.out;

  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();

  const std::string log = daemon.log();
  // 3 x 30 launches of 2 ms in turns of at least 200 ms: every job had the device more than once.
  EXPECT_GE(expect_prefetch_before_every_switch(log, from), 3) << log;
  EXPECT_EQ(log.find("swap-out job=prod"), std::string::npos) << "production lost its memory";
  EXPECT_NE(log.find("prefetched pid="), std::string::npos) << "no prefetch was acknowledged";
  // The events of one switch, in their order: the switch, the current job out (acknowledged),
  // then the rest of the next job in, acknowledged, and it resumes.
  std::vector<std::string> lines;
  std::istringstream in(log.substr(from));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::smatch m;
  size_t at = 0;
  while (at < lines.size() &&
         !std::regex_search(
             lines[at], m,
             std::regex(R"(rotation switch device=0 job=(\S+) id=(\d+) after job=(\S+) id=(\d+))")))
    ++at;
  ASSERT_LT(at, lines.size()) << "no switch between two live jobs\n" << log;
  const std::string next = " job=" + m[1].str() + " id=" + m[2].str() + " ";
  const std::string current = " job=" + m[3].str() + " id=" + m[4].str() + " ";
  const std::vector<std::pair<std::string, std::string>> events = {{"swap-out", current},
                                                                   {"swapped-out pid=", current},
                                                                   {"swap-in", next},
                                                                   {"swapped-in pid=", next}};
  for (const auto& [event, whose] : events) {
    while (at < lines.size() && (lines[at].find(event) == std::string::npos ||
                                 lines[at].find(whose) == std::string::npos))
      ++at;
    ASSERT_LT(at, lines.size()) << "no \"" << event << whose << "\" after the switch\n" << log;
  }

  for (RotatingJob& job : jobs) {
    auto state = memory_state(daemon.socket, job.process.pid());
    EXPECT_GE(state.value("swaps_out", 0), 1) << state.dump();
    EXPECT_GE(state.value("swaps_in", 0), 1) << state.dump();
  }
  EXPECT_EQ(memory_state(daemon.socket, production.pid()).value("swaps_out", 0), 0);
}

// memory.rotation.prefetch = false: the same turns, each job coming in whole after the switch.
struct RotationWithoutPrefetch : Rotation {
  void SetUp() override {
    daemon.write_config(rotation_config(trace, /*prefetch=*/false));
    Rotation::SetUp();
  }
};

TEST_F(RotationWithoutPrefetch, JobsStillTakeTurnsAndNothingIsPrefetched) {
  const size_t from = daemon.log().size();
  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();
  const std::string log = daemon.log();
  EXPECT_EQ(log.find("rotation prefetch"), std::string::npos) << log;
  EXPECT_EQ(log.find("prefetched pid="), std::string::npos) << log;
  // Every switch after set-up brings the next job in whole.
  std::regex whole(R"(swap-in job=\S+ id=\d+ device=0 bytes=(\d+): rotation)");
  int swap_ins = 0;
  for (std::sregex_iterator it(log.begin() + static_cast<std::ptrdiff_t>(from), log.end(), whole),
       end;
       it != end; ++it, ++swap_ins)
    EXPECT_EQ(std::stoull((*it)[1]), kAllocations * kEach) << it->str();
  EXPECT_GE(swap_ins, 3) << log;
}

// A job whose memory grew within memory.rotation.growth_quiet_ms has not reached its working set:
// nothing is prefetched beside it (its next allocation would find the room taken). The jobs here
// allocated at their start, so a quiet time of ten minutes covers the whole run.
TEST_F(Rotation, NothingIsPrefetchedBesideAJobWhoseMemoryJustGrew) {
  nlohmann::json config = rotation_config(trace);
  config["memory"]["rotation"]["growth_quiet_ms"] = 600000;
  daemon.write_config(config);
  ASSERT_EQ(run_ctl(daemon.socket, {"reload"}).exit_code, 0);
  const size_t from = daemon.log().size();

  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();
  const std::string log = daemon.log().substr(from);
  EXPECT_NE(log.find("rotation switch"), std::string::npos) << "the jobs still take turns";
  EXPECT_EQ(log.find("rotation prefetch"), std::string::npos) << log;
}

TEST_F(Rotation, AJobKilledWhileSwappedOutLeavesNothingInTheBooks) {
  RotatingJob& victim = jobs[1];
  ASSERT_TRUE(stop_while_on_host(victim)) << daemon.log();
  const pid_t victim_pid = victim.process.pid();
  victim.process.signal(SIGKILL);
  victim.process.wait();
  victim.process = ChildProcess();
  EXPECT_TRUE(eventually([&] { return !job_with_pid(daemon.socket, victim_pid); }, 5s));

  // The others still take turns and finish.
  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();
  const uint64_t left = kProductionBytes + 2 * kAllocations * kEach;
  EXPECT_EQ(books(daemon.socket), left) << "the killed job's memory is still counted";

  for (RotatingJob& job : jobs) job.process = ChildProcess();  // killed and reaped
  production = ChildProcess();
  EXPECT_TRUE(eventually([&] { return list_jobs(daemon.socket).empty(); }, 5s));
  EXPECT_EQ(books(daemon.socket), 0u);
  // The next tick ends the rotation: status shows none.
  EXPECT_TRUE(eventually(
      [&] {
        CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
        for (const auto& d : status.json["devices"])
          if (!d["rotation"].is_null()) return false;
        return status.exit_code == 0;
      },
      5s))
      << daemon.log();
  EXPECT_TRUE(daemon.log_contains("rotation ends device=0")) << daemon.log();
}

// A stopped process cannot acknowledge the move it is asked for: past memory.swap_timeout_ms the
// others take their turns without it (its turn passes at once); continued, it catches up and
// finishes bit-identical.
TEST_F(Rotation, AJobThatStopsAnsweringDoesNotHoldTheOthers) {
  nlohmann::json config = rotation_config(trace);
  config["memory"]["swap_timeout_ms"] = 500;
  daemon.write_config(config);
  ASSERT_EQ(run_ctl(daemon.socket, {"reload"}).exit_code, 0);
  RotatingJob& stopped = jobs[1];
  ASSERT_TRUE(stop_while_on_host(stopped)) << daemon.log();
  const int its_launches = stopped.launches_left;
  stopped.launches_left = 0;  // not driven while stopped

  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  // The rotation reaches it (prefetch or turn) whatever the others do; its move never comes.
  ASSERT_TRUE(
      daemon.wait_for_log("is not acknowledged after 500 ms; the other jobs take their "
                          "turns without it",
                          10s))
      << daemon.log();
  // More work for the others: their turns now pass the stopped job's place in the cycle.
  for (RotatingJob& job : jobs)
    if (&job != &stopped) job.launches_left = kLaunches;
  ASSERT_TRUE(run_to_the_end()) << daemon.log();

  stopped.process.signal(SIGCONT);
  for (RotatingJob& job : jobs) job.launches_left = &job == &stopped ? its_launches : 0;
  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();
}

// A reload that turns rotation off leaves no job behind: one held prefetched (paused, part of its
// memory on the device) comes back whole and runs once the others leave room, as any job waiting
// on host does without rotation.
TEST_F(Rotation, AReloadThatTurnsRotationOffLeavesNoJobPrefetchedForever) {
  uint64_t part = 0;
  const int held = hold_a_prefetched_job(&part);
  ASSERT_GE(held, 0) << daemon.log();
  nlohmann::json config = rotation_config(trace);
  config["memory"].erase("rotation");
  daemon.write_config(config);
  CtlResult reload = run_ctl(daemon.socket, {"reload"});
  ASSERT_EQ(reload.exit_code, 0) << reload.err;
  EXPECT_TRUE(eventually(
      [&] {
        CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
        return status.exit_code == 0 && status.json["devices"][0]["rotation"].is_null();
      },
      5s));

  RotatingJob& job = jobs[static_cast<size_t>(held)];
  for (size_t k = 0; k < jobs.size(); ++k)
    if (static_cast<int>(k) != held) jobs[k].process = ChildProcess();  // killed: room returns
  ASSERT_EQ(job.process.ask("launch 1 0", 20s), "ok") << daemon.log();
  EXPECT_EQ(memory_state(daemon.socket, job.process.pid()).value("state", ""), "resident");
  EXPECT_EQ(device().bytes_of_pid(0, job.process.pid()), kAllocations * kEach) << "all of it back";
  // Brought back by the swap-in without rotation: the rest of it only.
  const std::string log = daemon.log();
  EXPECT_TRUE(std::regex_search(
      log, std::regex("swap-in job=" + job.name + R"( id=\d+ device=0 bytes=)" +
                      std::to_string(kAllocations * kEach - part) + R"( \(reward)")))
      << log;
  expect_bit_identical();
}

// Production takes its room from the rotating jobs as from any: the running one and the one
// prefetched both leave the device whole (a job partly on the device leaves from there).
TEST_F(Rotation, ProductionTakesTheRoomOfThePrefetchedJobToo) {
  uint64_t part = 0;
  const int held = hold_a_prefetched_job(&part);
  ASSERT_GE(held, 0) << daemon.log();
  const pid_t prefetched = jobs[static_cast<size_t>(held)].process.pid();

  // 64 - 4 - 1 MiB: every opportunistic byte must leave.
  const uint64_t asked = kCapacity - kProductionBytes - kMiB;
  auto p = ok_number(production.ask("alloc " + std::to_string(asked), 20s));
  ASSERT_TRUE(p) << "production must get its memory\n" << daemon.log();
  EXPECT_EQ(device().bytes_of_pid(0, prefetched), 0u) << "the prefetched part stayed behind";
  EXPECT_LE(device().used_bytes(0), kCapacity);
  EXPECT_EQ(paused_bits(production), 0u);
  EXPECT_EQ(memory_state(daemon.socket, production.pid()).value("swaps_out", 0), 0);

  // Once production frees, they take their turns again (short ones, as configured at first) and
  // finish bit-identical.
  ASSERT_EQ(production.ask("free " + std::to_string(*p)), "ok");
  daemon.write_config(rotation_config(trace));
  ASSERT_EQ(run_ctl(daemon.socket, {"reload"}).exit_code, 0);
  ASSERT_TRUE(run_to_the_end()) << daemon.log();
  expect_bit_identical();
}

}  // namespace
}  // namespace gpushare::testing