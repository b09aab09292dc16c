// Shared by the rotation tests (rotation_test.cpp, memory_trace_test.cpp): a daemon rotating
// opportunistic residency (docs/memory.md, "Rotating residency") on a fake device of 64 MiB, a
// production job holding 4 MiB, and three opportunistic jobs of 4 x 10 MiB, each buffer filled
// and checksummed: the budget of 60 MiB holds one and a half of them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fake_device_view.h"
#include "memory_test_support.h"

namespace gpushare::testing {

inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr uint64_t kProductionBytes = 4 * kMiB;
inline constexpr int kAllocations = 4;
inline constexpr uint64_t kEach = 10 * kMiB;  // a job: 4 x 10 MiB
inline constexpr int kLaunches = 30;          // per job, one command each: several turns of 200 ms
inline constexpr auto kRunLimit = 50s;  // liveness only: nothing asserts how long a turn takes

// FIFO turns of at least 200 ms; `trace`: where the daemon records what gpushare-sim's memory
// model replays.
nlohmann::json rotation_config(const std::string& trace, bool prefetch = true);

struct Buffer {
  uint64_t pointer = 0;
  std::string checksum;
};

struct RotatingJob {
  std::string name;
  ChildProcess process;
  std::vector<Buffer> buffers;
  int launches_left = kLaunches;
  bool asked = false;  // a launch command waits for its answer
};

// "block <paused> <residency>" -> the paused bits.
std::optional<unsigned> paused_bits(ChildProcess& client);
// The memory the daemon's books hold on all devices (`gpusharectl status`).
uint64_t books(const std::string& socket);

struct Rotation : ::testing::Test {
  TempDir dir;
  const std::string trace = dir / "memory-trace.jsonl";
  Daemon daemon{dir, rotation_config(trace)};
  ChildProcess production;
  std::vector<RotatingJob> jobs;

  void SetUp() override;
  fake::DeviceView device() const { return fake::DeviceView(dir / "fake-device"); }
  // Runs every live job's launches to the end, one command at a time each, while production
  // launches beside them: production is never paused, and the device never holds more than the
  // capacity. Returns false if the jobs did not finish within kRunLimit.
  bool run_to_the_end();
  // Turns of a minute from now on, so that the job seen prefetched stays so: its index, or -1.
  // `part`: what of it the daemon counts on the device, which is what the device holds of it.
  // (Tried up to three times: try_to_hold_a_prefetched_job once.)
  int hold_a_prefetched_job(uint64_t* part);
  int try_to_hold_a_prefetched_job(uint64_t* part);
  void expect_bit_identical();
  // Stops (SIGSTOP) the job at a moment when none of its memory is on the device; false if no
  // such moment came.
  bool stop_while_on_host(RotatingJob& job);
};

}  // namespace gpushare::testing
