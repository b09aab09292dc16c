// A steady GPU job for end-to-end tests: launches spin kernels of U microseconds back to back
// (with an optional sleep of G microseconds between them) for S seconds, optionally holding
// device memory, and reports its kernel rate.
//
// Step mode, for training/inference loops (useful with the fake's GPUSHARE_FAKE_ASYNC_KERNELS=1,
// where launches return before their kernels ran): a step is --kernels-per-step N launches
// (default 1), then with --sync-every-step a cuStreamSynchronize, then the --gap-us sleep (so the
// gap is between steps; with N = 1 that is between kernels, as before). It also reports "steps"
// and "steps_per_s". Without --sync-every-step on an asynchronous driver the counts are of
// launches, which may run ahead of the device by the driver's queue.
//
// On/off: with --on-seconds A --off-seconds B it runs steps for A seconds, then drains its stream
// and idles B seconds, and so on (a job busy in phases).
#include <time.h>

#include <CLI/CLI.hpp>
#include <cmath>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

namespace {
double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spin-kernel workload"};
  unsigned kernel_us = 1000, gap_us = 0;
  double seconds = 1.0;
  bool per_thread = false;
  uint64_t alloc_bytes = 0;
  int device = 0;
  app.add_option("--kernel-us", kernel_us, "duration of each kernel");
  app.add_option("--seconds", seconds, "how long to run")->required();
  app.add_option("--gap-us", gap_us, "sleep between steps (a step is one kernel by default)");
  unsigned kernels_per_step = 1;
  bool sync_every_step = false;
  app.add_option("--kernels-per-step", kernels_per_step, "launches per step")
      ->check(CLI::PositiveNumber);
  app.add_flag("--sync-every-step", sync_every_step, "cuStreamSynchronize after each step");
  app.add_option("--alloc-bytes", alloc_bytes, "device memory held while running");
  app.add_option("--device", device);
  app.add_flag("--ptds", per_thread);
  double on_s = 0, off_s = 0;
  app.add_option("--on-seconds", on_s,
                 "with --off-seconds: run steps this long, then idle --off-seconds, and so on");
  app.add_option("--off-seconds", off_s, "idle time of each on/off cycle (0: always on)");
  double settle = 0;
  app.add_option("--settle-seconds", settle,
                 "run this long before counting (a controller's convergence), then --seconds more");
  CLI11_PARSE(app, argc, argv);

  DriverApi api;
  CudartResolution resolution = resolve_cudart_style(api, CUDA_VERSION, per_thread);
  if (!resolution.error.empty()) return print_result({{"error", resolution.error}});
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  CUstream stream = nullptr;
  static const char kImage[] = "gpushare fake module";
  std::string name = "spin_" + std::to_string(kernel_us);
  if (api.init(0) != CUDA_SUCCESS || api.primary_ctx_retain(&ctx, device) != CUDA_SUCCESS ||
      api.ctx_set_current(ctx) != CUDA_SUCCESS || api.stream_create(&stream, 0) != CUDA_SUCCESS ||
      api.module_load_data(&module, kImage) != CUDA_SUCCESS ||
      api.module_get_function(&kernel, module, name.c_str()) != CUDA_SUCCESS) {
    return print_result({{"error", "setup failed"}});
  }
  CUdeviceptr held = 0;
  if (alloc_bytes > 0 && api.mem_alloc(&held, alloc_bytes) != CUDA_SUCCESS) {
    return print_result({{"error", "out of memory"}});
  }
  const timespec gap{static_cast<time_t>(gap_us / 1'000'000),
                     static_cast<long>(gap_us % 1'000'000) * 1000};
  const double cycle_start = now_s();
  // One step: its launches, the optional synchronisation, the gap. "" or what failed. In the off
  // part of an on/off cycle: the queue drains, then the job idles until the next on part.
  auto step = [&]() -> std::string {
    if (on_s > 0 && off_s > 0) {
      const double in_cycle = std::fmod(now_s() - cycle_start, on_s + off_s);
      if (in_cycle >= on_s) {
        if (api.stream_synchronize(stream) != CUDA_SUCCESS) return "synchronize failed";
        const double left = on_s + off_s - std::fmod(now_s() - cycle_start, on_s + off_s);
        const timespec idle{static_cast<time_t>(left),
                            static_cast<long>((left - std::floor(left)) * 1e9)};
        if (left < on_s + off_s && left > 0) nanosleep(&idle, nullptr);
      }
    }
    for (unsigned k = 0; k < kernels_per_step; ++k) {
      if (api.launch_kernel(kernel, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr) != CUDA_SUCCESS)
        return "launch failed";
    }
    if (sync_every_step && api.stream_synchronize(stream) != CUDA_SUCCESS)
      return "synchronize failed";
    if (gap_us > 0) nanosleep(&gap, nullptr);
    return "";
  };
  for (double settle_end = now_s() + settle; now_s() < settle_end;) {
    if (std::string error = step(); !error.empty()) return print_result({{"error", error}});
  }
  long long steps = 0;
  double start = now_s(), elapsed = 0;
  do {
    if (std::string error = step(); !error.empty()) return print_result({{"error", error}});
    ++steps;
    elapsed = now_s() - start;
  } while (elapsed < seconds);
  const long long kernels = steps * kernels_per_step;
  return print_result({{"kernels", kernels},
                       {"seconds", elapsed},
                       {"kernels_per_s", static_cast<double>(kernels) / elapsed},
                       {"steps", steps},
                       {"steps_per_s", static_cast<double>(steps) / elapsed}});
}
