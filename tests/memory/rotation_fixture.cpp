// The rotation tests' fixture (rotation_fixture.h).
#include "rotation_fixture.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <optional>
#include <thread>
#include <utility>

namespace gpushare::testing {

nlohmann::json rotation_config(const std::string& trace, bool prefetch) {
  nlohmann::json config = memory_config();
  config["memory"]["rotation"] = {
      {"enabled", true}, {"order", "fifo"}, {"min_turn_ms", 200}, {"prefetch", prefetch},
      // The jobs allocate everything before they launch: no growth to wait for.
      {"growth_quiet_ms", 0}};
  config["memory"]["trace"] = trace;
  return config;
}

std::optional<unsigned> paused_bits(ChildProcess& client) {
  unsigned paused = 0, residency = 0;
  if (std::sscanf(client.ask("block").c_str(), "block %u %u", &paused, &residency) != 2)
    return std::nullopt;
  return paused;
}

uint64_t books(const std::string& socket) {
  CtlResult status = run_ctl(socket, {"status", "-o", "json"});
  uint64_t on_devices = 0;
  for (const auto& d : status.json["devices"]) on_devices += d.value("memory_bytes", uint64_t{0});
  return on_devices;
}

void Rotation::SetUp() {
  ASSERT_TRUE(daemon.start());
  production = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(production.running());
  ASSERT_TRUE(ok_number(production.ask("alloc " + std::to_string(kProductionBytes))));
  for (const char* name : {"opp-a", "opp-b", "opp-c"}) {
    RotatingJob job;
    job.name = name;
    job.process = start_client(dir, daemon.socket, name, "opportunistic");
    ASSERT_TRUE(job.process.running());
    for (int i = 0; i < kAllocations; ++i) {
      // A job whose memory does not fit is admitted on host and waits for its turn.
      auto p = ok_number(job.process.ask("alloc " + std::to_string(kEach), 20s));
      ASSERT_TRUE(p) << name << "\n" << daemon.log();
      std::string range = std::to_string(*p) + " " + std::to_string(kEach);
      ASSERT_EQ(job.process.ask("fill " + range + " " + std::to_string(jobs.size() * 10 + i + 1)),
                "ok");
      std::string checksum = job.process.ask("checksum " + range);
      ASSERT_EQ(checksum.rfind("ok ", 0), 0u) << checksum;
      job.buffers.push_back({*p, checksum});
    }
    jobs.push_back(std::move(job));
  }
}

bool Rotation::run_to_the_end() {
  auto started = std::chrono::steady_clock::now();
  for (;;) {
    bool done = true;
    for (RotatingJob& job : jobs) {
      if (!job.process.running() || job.launches_left == 0) continue;
      done = false;
      if (!job.asked) {
        EXPECT_TRUE(job.process.send_line("launch 1 2000"));
        job.asked = true;
      }
      if (auto answer = job.process.read_line(5ms)) {
        EXPECT_EQ(*answer, "ok");
        job.asked = false;
        --job.launches_left;
      }
    }
    if (done) return true;
    EXPECT_EQ(production.ask("launch 1 0"), "ok");
    EXPECT_EQ(paused_bits(production), 0u) << "production paused";
    // One counter of the fake device, so one reading: never two jobs' moves half seen.
    EXPECT_LE(device().used_bytes(0), kCapacity) << "more on the device than its capacity";
    if (seconds_since(started) > std::chrono::duration<double>(kRunLimit).count()) return false;
  }
}

int Rotation::hold_a_prefetched_job(uint64_t* part) {
  // Turns held for a minute, so that the prefetched job stays so. The room a prefetch gets is
  // decided at the switch before it; on a busy machine that switch can fall where the room is
  // not yet what it will be (2026-12-07, CI: the daemon then counted an allocation's reservation
  // beside its commit, which no longer happens, and a prefetch of 0 bytes was held for the
  // minute). Then turns resume for a moment and the hold is tried again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0) {
      daemon.write_config(rotation_config(trace));
      if (run_ctl(daemon.socket, {"reload"}).exit_code != 0) return -1;
      std::this_thread::sleep_for(500ms);
    }
    const int held = try_to_hold_a_prefetched_job(part);
    if (held >= 0) return held;
  }
  return -1;
}

int Rotation::try_to_hold_a_prefetched_job(uint64_t* part) {
  nlohmann::json config = rotation_config(trace);
  config["memory"]["rotation"]["min_turn_ms"] = 60000;
  daemon.write_config(config);
  if (run_ctl(daemon.socket, {"reload"}).exit_code != 0) return -1;
  // Prefetched, and the rotation's next job, not the one a switch in progress brings in: which job
  // and how much of it is on the device, where the daemon and the device agree.
  auto prefetched_now = [&]() -> std::optional<std::pair<int, uint64_t>> {
    CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
    const nlohmann::json rotation = status.json["devices"][0]["rotation"];
    if (!rotation.is_object() || !rotation["prefetch"].is_number() ||
        rotation["prefetch"] == rotation["current"])
      return std::nullopt;
    for (size_t k = 0; k < jobs.size(); ++k) {
      const pid_t pid = jobs[k].process.pid();
      auto job = job_with_pid(daemon.socket, pid);
      if (!job || (*job)["id"] != rotation["prefetch"]) continue;
      const nlohmann::json state = memory_state(daemon.socket, pid);
      const uint64_t bytes = state.value("prefetched_bytes", uint64_t{0});
      if (state.value("state", "") != "prefetched" || bytes == 0 ||
          device().bytes_of_pid(0, pid) != bytes)
        return std::nullopt;
      return std::pair{static_cast<int>(k), bytes};
    }
    return std::nullopt;
  };
  // The same reading twice in a row: under load (2026-11-27, one run in 25 beside two busy
  // loops) the job was found prefetched and its bytes then read 0, the rotation having moved it
  // again between the two queries.
  std::optional<std::pair<int, uint64_t>> last, settled;
  eventually(
      [&] {
        const std::optional<std::pair<int, uint64_t>> now = prefetched_now();
        if (now && last && *now == *last) settled = now;
        last = now;
        return settled.has_value();
      },
      10s, 50ms);
  if (!settled) return -1;
  *part = settled->second;
  EXPECT_LT(*part, kAllocations * kEach);
  return settled->first;
}

void Rotation::expect_bit_identical() {
  for (RotatingJob& job : jobs) {
    if (!job.process.running()) continue;
    for (const Buffer& b : job.buffers)
      EXPECT_EQ(
          job.process.ask("checksum " + std::to_string(b.pointer) + " " + std::to_string(kEach)),
          b.checksum)
          << "contents changed while taking turns";
  }
}

bool Rotation::stop_while_on_host(RotatingJob& job) {
  // Stopped, a job cannot move its memory: once the device holds none of it, it is on host.
  for (int attempt = 0; attempt < 200; ++attempt) {
    job.process.signal(SIGSTOP);
    if (device().bytes_of_pid(0, job.process.pid()) == 0 &&
        memory_state(daemon.socket, job.process.pid()).value("state", "") != "resident")
      return true;
    job.process.signal(SIGCONT);
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace gpushare::testing
