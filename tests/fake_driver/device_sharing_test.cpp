// The simulated device between processes: one engine shared FIFO-fairly, memory that runs out
// for real, and nothing wedged by a process that dies holding or waiting for the engine.
// Each test uses its own device file and runs tests/clients/client_workload.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fake_device_view.h"
#include "subprocess.h"

namespace gpushare::fake {
namespace {

using gpushare::testing::Env;
using gpushare::testing::ProcessResult;
using gpushare::testing::Subprocess;
using gpushare::testing::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class DeviceSharing : public ::testing::Test {
 protected:
  Env env() const {
    return {{"LD_LIBRARY_PATH", GPUSHARE_FAKE_DRIVER_DIR},
            {"GPUSHARE_FAKE_DEVICE_FILE", dir_.file("device")},
            {"GPUSHARE_FAKE_MEMORY", "64M"}};
  }
  std::vector<std::string> workload(unsigned kernel_us, double seconds, uint64_t alloc = 0) const {
    return {std::string(GPUSHARE_CLIENTS_DIR) + "/client_workload",
            "--kernel-us",
            std::to_string(kernel_us),
            "--seconds",
            std::to_string(seconds),
            "--alloc-bytes",
            std::to_string(alloc)};
  }
  static nlohmann::json output_of(const ProcessResult& r) {
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  // Polls `condition` on the device file for up to 10 s.
  template <class F>
  bool wait_until(F condition) const {
    for (double deadline = now_s() + 10; now_s() < deadline;) {
      DeviceView view(dir_.file("device"));
      if (view.ok() && condition(view)) return true;
      timespec pause{0, 5'000'000};
      nanosleep(&pause, nullptr);
    }
    return false;
  }

  TempDir dir_;
};

// Two processes launching back to back share the one engine about half and half, and their
// kernels never overlap (the kernels' total time fits in the wall time).
TEST_F(DeviceSharing, TwoProcessesShareTheEngineFairly) {
  const unsigned kernel_us = 2000;
  ProcessResult solo = gpushare::testing::run_process(workload(kernel_us, 0.6), env());
  ASSERT_EQ(solo.exit_code, 0) << solo.out << solo.err;
  const double solo_rate = output_of(solo)["kernels_per_s"].get<double>();

  const double start = now_s();
  Subprocess a(workload(kernel_us, 1.5), env()), b(workload(kernel_us, 1.5), env());
  ProcessResult ra = a.wait(), rb = b.wait();
  const double wall = now_s() - start;
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  const double ka = output_of(ra)["kernels"].get<double>();
  const double kb = output_of(rb)["kernels"].get<double>();
  EXPECT_GT(ka / kb, 0.75) << ka << " vs " << kb;
  EXPECT_LT(ka / kb, 1.33) << ka << " vs " << kb;
  EXPECT_LE((ka + kb) * kernel_us * 1e-6, wall) << "kernels of two processes overlapped";
  const double shared_rate = output_of(ra)["kernels_per_s"].get<double>();
  EXPECT_GT(shared_rate / solo_rate, 0.35);
  EXPECT_LT(shared_rate / solo_rate, 0.65);
  DeviceView view(dir_.file("device"));
  EXPECT_EQ(view.kernels(0),
            output_of(solo)["kernels"].get<uint64_t>() + static_cast<uint64_t>(ka + kb));
  EXPECT_EQ(view.tickets_taken(0), view.tickets_served(0));
}

TEST_F(DeviceSharing, MemoryRunsOutBetweenProcesses) {
  Subprocess holder(workload(1000, 1.5, 48 * kMiB), env());
  ASSERT_TRUE(wait_until([](const DeviceView& v) { return v.used_bytes(0) == 48 * kMiB; }));
  ProcessResult second = gpushare::testing::run_process(workload(0, 0.01, 32 * kMiB), env());
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.out.find("out of memory"), std::string::npos) << second.out;
  ASSERT_EQ(holder.wait().exit_code, 0);
  ProcessResult third = gpushare::testing::run_process(workload(0, 0.01, 32 * kMiB), env());
  EXPECT_EQ(third.exit_code, 0) << third.out << third.err;
}

TEST_F(DeviceSharing, MemoryOfAKilledProcessIsReclaimed) {
  Subprocess holder(workload(1000, 30, 48 * kMiB), env());
  ASSERT_TRUE(wait_until([](const DeviceView& v) { return v.used_bytes(0) == 48 * kMiB; }));
  const int pid = holder.pid();
  holder.kill_and_wait(SIGKILL);
  ProcessResult next = gpushare::testing::run_process(workload(0, 0.01, 32 * kMiB), env());
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  DeviceView view(dir_.file("device"));
  EXPECT_EQ(view.bytes_of_pid(0, pid), 0u);
}

// As with a real driver, memory is released when the process exits, before its parent reaps it:
// a killed, not yet reaped (zombie) holder leaves room for the next allocation.
TEST_F(DeviceSharing, MemoryOfAKilledButUnreapedProcessIsReclaimed) {
  Subprocess holder(workload(1000, 30, 48 * kMiB), env());
  ASSERT_TRUE(wait_until([](const DeviceView& v) { return v.used_bytes(0) == 48 * kMiB; }));
  ASSERT_EQ(::kill(holder.pid(), SIGKILL), 0);
  const std::string stat = "/proc/" + std::to_string(holder.pid()) + "/stat";
  auto zombie = [&] {
    std::ifstream in(stat);
    std::string line;
    std::getline(in, line);
    auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
  };
  for (double deadline = now_s() + 10; !zombie() && now_s() < deadline;) usleep(5000);
  ASSERT_TRUE(zombie()) << "the holder should be a zombie until it is reaped";
  ProcessResult next = gpushare::testing::run_process(workload(0, 0.01, 32 * kMiB), env());
  EXPECT_EQ(next.exit_code, 0) << "48 MiB of a dead process still counted\n" << next.out << next.err;
  holder.kill_and_wait(SIGKILL);
}

// A process killed while its 10-second kernel holds the engine, and another killed while waiting
// behind it, do not stall the next process.
TEST_F(DeviceSharing, DeadHolderAndWaiterAreSkipped) {
  Subprocess holder(workload(10'000'000, 0.001), env());
  ASSERT_TRUE(wait_until([](const DeviceView& v) { return v.tickets_taken(0) == 1; }));
  Subprocess waiter(workload(1000, 0.001), env());
  ASSERT_TRUE(wait_until([](const DeviceView& v) { return v.tickets_taken(0) == 2; }));
  EXPECT_EQ(DeviceView(dir_.file("device")).tickets_served(0), 0u) << "the holder still runs";
  waiter.kill_and_wait(SIGKILL);
  holder.kill_and_wait(SIGKILL);
  const double start = now_s();
  ProcessResult next = gpushare::testing::run_process(workload(1000, 0.05), env(), 8);
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  EXPECT_LT(now_s() - start, 5.0) << "the dead holder's kernel was waited for";
  DeviceView view(dir_.file("device"));
  EXPECT_EQ(view.tickets_taken(0), view.tickets_served(0));
}
}  // namespace
}  // namespace gpushare::fake
