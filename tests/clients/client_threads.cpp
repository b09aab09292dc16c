// T threads, each making M launches and A allocate/free pairs through cudart-style entry points:
// the shim's counters and allocation map must lose nothing under concurrency.
#include <CLI/CLI.hpp>
#include <atomic>
#include <thread>
#include <vector>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

int main(int argc, char** argv) {
  CLI::App app{"many threads launching and allocating"};
  int threads = 8, launches = 1000, allocs = 50;
  bool per_thread = false;
  app.add_option("--threads", threads);
  app.add_option("--launches", launches, "launches per thread");
  app.add_option("--allocs", allocs, "cuMemAlloc/cuMemFree pairs per thread");
  app.add_flag("--ptds", per_thread);
  CLI11_PARSE(app, argc, argv);

  DriverApi api;
  CudartResolution resolution = resolve_cudart_style(api, CUDA_VERSION, per_thread);
  if (!resolution.error.empty()) return print_result({{"error", resolution.error}});
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction kernel = nullptr;
  static const char kImage[] = "gpushare fake module";
  if (api.init(0) != CUDA_SUCCESS || api.primary_ctx_retain(&ctx, 0) != CUDA_SUCCESS ||
      api.ctx_set_current(ctx) != CUDA_SUCCESS ||
      api.module_load_data(&module, kImage) != CUDA_SUCCESS ||
      api.module_get_function(&kernel, module, "noop") != CUDA_SUCCESS) {
    return print_result({{"error", "setup failed"}});
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      if (api.ctx_set_current(ctx) != CUDA_SUCCESS) return void(++failures);
      for (int i = 0; i < launches; ++i) {
        if (api.launch_kernel(kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) !=
            CUDA_SUCCESS) {
          ++failures;
        }
        if (i < allocs) {
          CUdeviceptr p = 0;
          if (api.mem_alloc(&p, 65536) != CUDA_SUCCESS || api.mem_free(p) != CUDA_SUCCESS) {
            ++failures;
          }
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  nlohmann::json result = {{"client", "threads"},
                           {"threads", threads},
                           {"launches", static_cast<long long>(threads) * launches},
                           {"allocs", static_cast<long long>(threads) * std::min(allocs, launches)},
                           {"proc_address_v2", resolution.proc_address_calls_v2}};
  if (failures.load() != 0) result["error"] = std::to_string(failures.load()) + " calls failed";
  return print_result(result);
}
