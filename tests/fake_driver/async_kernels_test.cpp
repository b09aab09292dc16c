// The fake driver's async mode (GPUSHARE_FAKE_ASYNC_KERNELS=1, kernel_queue.h): launches return
// before their kernels ran, events and streams complete in queue order, synchronisations wait,
// copies see every queued kernel done, a full queue blocks the launch, processes still share the
// engine in FIFO order, and a process exiting with kernels queued neither hangs nor wedges the
// engine. main() sets the variable (read once) and a fresh device file before any test runs.
//
// To know that a kernel has not run yet without trusting the clock, tests park the engine behind
// another process's long kernel (client_workload, synchronous) and kill it when they are done.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "cuda_api.h"
#include "fake_device_view.h"
#include "subprocess.h"

namespace {

using gpushare::fake::DeviceView;
using gpushare::testing::Env;
using gpushare::testing::ProcessResult;
using gpushare::testing::Subprocess;
using gpushare::testing::TempDir;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string client_workload() {
  return std::string(GPUSHARE_CLIENTS_DIR) + "/client_workload";
}

// Polls `condition` on the device file at `path` for up to 10 s.
template <class F>
bool wait_until(const std::string& path, F condition) {
  for (double deadline = now_s() + 10; now_s() < deadline;) {
    DeviceView view(path);
    if (view.ok() && condition(view)) return true;
    timespec pause{0, 2'000'000};
    nanosleep(&pause, nullptr);
  }
  return false;
}

class AsyncKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    view_.emplace();
    ASSERT_TRUE(view_->ok());
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    static const char kImage[] = "module";
    ASSERT_EQ(cuModuleLoadData(&module_, kImage), CUDA_SUCCESS);
  }
  void TearDown() override {
    holder_.reset();  // never leave the engine parked for the next test
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    cuModuleUnload(module_);
  }

  CUfunction kernel(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module_, name), CUDA_SUCCESS);
    return f;
  }
  static CUresult launch(CUfunction f, CUstream stream) {
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
  }

  // Another process takes the engine with a 30-second kernel; returns once it holds it.
  void park_engine() {
    const uint32_t taken = view_->tickets_taken(0);
    holder_.emplace(std::vector<std::string>{client_workload(), "--kernel-us", "30000000",
                                             "--seconds", "0.001"},
                    Env{{"LD_LIBRARY_PATH", GPUSHARE_FAKE_DRIVER_DIR},
                        {"GPUSHARE_FAKE_DEVICE_FILE", gpushare::fake::device_file_path()}});
    ASSERT_TRUE(wait_until(gpushare::fake::device_file_path(),
                           [&](const DeviceView& v) { return v.tickets_taken(0) == taken + 1; }));
  }
  bool engine_parked() const {
    return view_->tickets_served(0) + 1 == view_->tickets_taken(0) ||
           view_->tickets_served(0) + 2 == view_->tickets_taken(0);
  }
  // Kills the holder: the queue's executor skips its ticket (a dead holder) and runs.
  void release_engine() { holder_.reset(); }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::optional<DeviceView> view_;
  std::optional<Subprocess> holder_;
};

// Every launch entry point queues its kernel and returns while the engine is still taken by
// another process's kernel (a synchronous launch would wait for it); queries say NOT_READY until
// the queue ran, then the kernels are all counted.
TEST_F(AsyncKernels, LaunchesReturnBeforeTheirKernelsRun) {
  CUfunction f = kernel("spin_20000");
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = f;
  CUgraphNode node = nullptr;
  ASSERT_EQ(cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &params), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &params), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream;
  const uint64_t before = view_->kernels(0);

  park_engine();
  ASSERT_EQ(launch(f, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernelEx(&config, f, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernelEx_ptsz(&config, f, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, stream, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch_ptsz(exec, stream), CUDA_SUCCESS);
  CUevent event = nullptr;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(event, stream), CUDA_SUCCESS);
  EXPECT_TRUE(engine_parked()) << "a launch waited for the engine";
  EXPECT_EQ(view_->kernels(0), before);
  EXPECT_EQ(cuEventQuery(event), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY) << "the NULL stream stands for all";

  release_engine();
  ASSERT_EQ(cuEventSynchronize(event), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(event), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 10);
  cuEventDestroy_v2(event);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  cuStreamDestroy_v2(stream);
}

// The clock version of the same, with wide margins: queuing five 50 ms kernels takes less than
// one of them runs, and the event after them is pending at once, done after cuEventSynchronize.
TEST_F(AsyncKernels, QueuingIsFasterThanRunning) {
  CUfunction f = kernel("spin_50000");
  CUevent event = nullptr;
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  const double start = now_s();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(launch(f, nullptr), CUDA_SUCCESS);
  const double queued = now_s() - start;
  ASSERT_EQ(cuEventRecord(event, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(event), CUDA_ERROR_NOT_READY);
  EXPECT_LT(queued, 0.050);
  ASSERT_EQ(cuEventSynchronize(event), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(event), CUDA_SUCCESS);
  EXPECT_GE(now_s() - start, 0.250) << "five 50 ms kernels ran one after the other";
  cuEventDestroy_v2(event);
}

// Kernels of one stream run in launch order, and an event's time is when the stream reached it:
// each 20 ms kernel separates its two events by at least its duration. A stream without work is
// complete while another stream's kernels are queued.
TEST_F(AsyncKernels, StreamOrderIsKeptAndEventsTimeTheKernels) {
  CUfunction f = kernel("spin_20000");
  CUstream busy = nullptr, idle = nullptr;
  ASSERT_EQ(cuStreamCreate(&busy, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&idle, 0), CUDA_SUCCESS);
  CUevent e[3] = {};
  for (CUevent& x : e) ASSERT_EQ(cuEventCreate(&x, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e[0], busy), CUDA_SUCCESS);
  ASSERT_EQ(launch(f, busy), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e[1], busy), CUDA_SUCCESS);
  ASSERT_EQ(launch(f, busy), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(e[2], busy), CUDA_SUCCESS);
  CUevent on_idle = nullptr;
  ASSERT_EQ(cuEventCreate(&on_idle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(on_idle, idle), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(on_idle), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(idle), CUDA_SUCCESS);

  ASSERT_EQ(cuEventSynchronize(e[2]), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(e[1]), CUDA_SUCCESS) << "the earlier event completes first";
  float first = 0, second = 0;
  ASSERT_EQ(cuEventElapsedTime_v2(&first, e[0], e[1]), CUDA_SUCCESS);
  ASSERT_EQ(cuEventElapsedTime_v2(&second, e[1], e[2]), CUDA_SUCCESS);
  EXPECT_GE(first, 20.0f);
  EXPECT_GE(second, 20.0f) << "the second kernel started before the first was done";
  for (CUevent x : e) cuEventDestroy_v2(x);
  cuEventDestroy_v2(on_idle);
  cuStreamDestroy_v2(busy);
  cuStreamDestroy_v2(idle);
}

// An event still pending has no elapsed time yet (as on the real driver).
TEST_F(AsyncKernels, ElapsedTimeOfAPendingEventIsNotReady) {
  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&end, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(start, nullptr), CUDA_SUCCESS);
  park_engine();
  ASSERT_EQ(launch(kernel("noop"), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(end, nullptr), CUDA_SUCCESS);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_ERROR_NOT_READY);
  release_engine();
  ASSERT_EQ(cuEventSynchronize(end), CUDA_SUCCESS);
  EXPECT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
  cuEventDestroy_v2(start);
  cuEventDestroy_v2(end);
}

// cuCtxSynchronize and cuStreamSynchronize wait for the queued kernels; copies wait too, so a
// program that reads results after launches reads them after the kernels.
TEST_F(AsyncKernels, SynchronisationsAndCopiesWaitForQueuedKernels) {
  CUfunction f = kernel("spin_10000");
  CUstream a = nullptr, b = nullptr;
  ASSERT_EQ(cuStreamCreate(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&b, 0), CUDA_SUCCESS);
  uint64_t before = view_->kernels(0);
  ASSERT_EQ(launch(f, a), CUDA_SUCCESS);
  ASSERT_EQ(launch(f, b), CUDA_SUCCESS);
  ASSERT_EQ(launch(f, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 3);
  EXPECT_EQ(cuStreamQuery(a), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(b), CUDA_SUCCESS);

  before = view_->kernels(0);
  ASSERT_EQ(launch(f, a), CUDA_SUCCESS);
  ASSERT_EQ(launch(f, a), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(a), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 2);

  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
  const char text[] = "queued kernels first";
  char back[sizeof text] = {};
  before = view_->kernels(0);
  ASSERT_EQ(launch(f, b), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD_v2(p, text, sizeof text), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 1) << "a copy ran before the kernel queued ahead of it";
  ASSERT_EQ(launch(f, b), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH_v2(back, p, sizeof text), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 2);
  EXPECT_STREQ(back, text);
  ASSERT_EQ(launch(f, b), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD8_v2(p, 0, 1), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 3);
  cuMemFree_v2(p);
  cuStreamDestroy_v2(a);
  cuStreamDestroy_v2(b);
}

// A queue of kQueueBound (4096) unfinished kernels blocks the next launch until one finishes.
TEST_F(AsyncKernels, AFullQueueBlocksTheLaunch) {
  CUfunction f = kernel("noop");
  park_engine();
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(launch(f, nullptr), CUDA_SUCCESS);
  std::atomic<bool> returned{false};
  std::thread late([&] {
    cuCtxSetCurrent(ctx_);
    launch(f, nullptr);
    returned = true;
  });
  timespec pause{0, 100'000'000};
  nanosleep(&pause, nullptr);
  EXPECT_FALSE(returned) << "the 4097th launch did not wait for room";
  EXPECT_TRUE(engine_parked());
  release_engine();
  late.join();
  EXPECT_TRUE(returned);
}

// A fork child starts with empty queues: the parent's queued kernels are not its own, so its
// synchronisation does not wait for them, and its own launches get an executor of their own.
TEST_F(AsyncKernels, AForkChildHasItsOwnQueue) {
  CUfunction spin = kernel("spin_20000"), noop = kernel("noop");
  park_engine();
  ASSERT_EQ(launch(spin, nullptr), CUDA_SUCCESS);
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    bool ok = cuCtxSynchronize() == CUDA_SUCCESS && cuStreamQuery(nullptr) == CUDA_SUCCESS &&
              launch(noop, nullptr) == CUDA_SUCCESS && cuStreamQuery(nullptr) != CUDA_SUCCESS;
    _exit(ok ? 0 : 1);  // its noop waits behind the parked engine: exiting must not hang either
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY) << "the parent's kernel is still queued";
  release_engine();
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_SUCCESS);
}

// Two asynchronous processes in step mode still share the one engine FIFO: about half each, and
// their kernels never overlap (all kernels' time fits in the wall time).
TEST(AsyncProcesses, TwoProcessesShareTheEngineFairly) {
  TempDir dir;
  const Env env{{"LD_LIBRARY_PATH", GPUSHARE_FAKE_DRIVER_DIR},
                {"GPUSHARE_FAKE_DEVICE_FILE", dir.file("device")},
                {"GPUSHARE_FAKE_ASYNC_KERNELS", "1"}};
  const unsigned kernel_us = 2000;
  std::vector<std::string> job = {client_workload(), "--kernel-us", std::to_string(kernel_us)};
  job.insert(job.end(), {"--seconds", "1.5", "--kernels-per-step", "5", "--sync-every-step"});
  const double start = now_s();
  Subprocess a(job, env), b(job, env);
  ProcessResult ra = a.wait(), rb = b.wait();
  const double wall = now_s() - start;
  ASSERT_EQ(ra.exit_code, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.out << rb.err;
  const auto ja = nlohmann::json::parse(ra.out), jb = nlohmann::json::parse(rb.out);
  const double ka = ja["kernels"].get<double>(), kb = jb["kernels"].get<double>();
  EXPECT_EQ(ja["kernels"].get<long long>(), 5 * ja["steps"].get<long long>());
  EXPECT_GT(ka / kb, 0.75) << ka << " vs " << kb;
  EXPECT_LT(ka / kb, 1.33) << ka << " vs " << kb;
  EXPECT_LE((ka + kb) * kernel_us * 1e-6, wall) << "kernels of two processes overlapped";
  DeviceView view(dir.file("device"));
  EXPECT_EQ(view.kernels(0), static_cast<uint64_t>(ka + kb)) << "synced steps ran every kernel";
  EXPECT_EQ(view.tickets_taken(0), view.tickets_served(0));
}

// Step mode reports steps; the gap between steps and the per-step synchronisation set their pace
// (each step takes at least 4 kernels of 2 ms plus a 5 ms gap).
TEST(AsyncProcesses, StepModeReportsStepsAtTheirPace) {
  TempDir dir;
  const Env env{{"LD_LIBRARY_PATH", GPUSHARE_FAKE_DRIVER_DIR},
                {"GPUSHARE_FAKE_DEVICE_FILE", dir.file("device")},
                {"GPUSHARE_FAKE_ASYNC_KERNELS", "1"}};
  ProcessResult r = gpushare::testing::run_process(
      {client_workload(), "--kernel-us", "2000", "--seconds", "0.5", "--kernels-per-step", "4",
       "--sync-every-step", "--gap-us", "5000"},
      env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double steps_per_s = j["steps_per_s"].get<double>();
  EXPECT_GT(j["steps"].get<long long>(), 0);
  EXPECT_EQ(j["kernels"].get<long long>(), 4 * j["steps"].get<long long>());
  EXPECT_LE(steps_per_s, 1 / 0.013) << "a step took less than its kernels and gap";
  EXPECT_GT(steps_per_s, 0.2 / 0.013) << "steps were far slower than their kernels and gap";
  EXPECT_NEAR(j["kernels_per_s"].get<double>(), 4 * steps_per_s, 1e-6 * steps_per_s);
}

// A process that exits with 4096 kernels of 20 ms queued (82 s of work) exits at once, and the
// next process gets the engine at once: its queue is dropped and its running kernel is a dead
// holder, skipped like any other.
TEST(AsyncProcesses, ExitWithAQueuePendingIsPrompt) {
  TempDir dir;
  Env env{{"LD_LIBRARY_PATH", GPUSHARE_FAKE_DRIVER_DIR},
          {"GPUSHARE_FAKE_DEVICE_FILE", dir.file("device")},
          {"GPUSHARE_FAKE_ASYNC_KERNELS", "1"}};
  double start = now_s();
  ProcessResult queued = gpushare::testing::run_process(
      {client_workload(), "--kernel-us", "20000", "--seconds", "0.2"}, env, 20);
  EXPECT_FALSE(queued.timed_out);
  EXPECT_EQ(queued.exit_code, 0) << queued.out << queued.err;
  const double kernels = nlohmann::json::parse(queued.out)["kernels"].get<double>();
  EXPECT_GT(kernels, 100) << "the launches should have run far ahead of the 20 ms kernels";
  EXPECT_LT(now_s() - start, 0.1 * kernels * 0.020) << "the exit waited for the queue";

  start = now_s();
  env.erase("GPUSHARE_FAKE_ASYNC_KERNELS");
  ProcessResult next = gpushare::testing::run_process(
      {client_workload(), "--kernel-us", "1000", "--seconds", "0.05"}, env, 20);
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  EXPECT_LT(now_s() - start, 0.1 * kernels * 0.020) << "the dead process's queue was run";
  DeviceView view(dir.file("device"));
  EXPECT_EQ(view.tickets_taken(0), view.tickets_served(0));
}
}  // namespace

int main(int argc, char** argv) {
  // One fresh simulated machine for this process, in async mode (read once, at the first launch).
  static TempDir dir;
  setenv("GPUSHARE_FAKE_DEVICE_FILE", dir.file("device").c_str(), 1);
  setenv("GPUSHARE_FAKE_ASYNC_KERNELS", "1", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
