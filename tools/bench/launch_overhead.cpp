// The cost of a kernel launch through libgpushare.so, on top of the same call without it.
// Run under the shim, against the null driver (see CMakeLists.txt / docs/benchmarks.md):
//   tools/bench/run_launch_overhead.sh build
#define __CUDA_API_VERSION_INTERNAL 1
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
LaunchFn g_through_shim = nullptr;  // dlsym("cuLaunchKernel"): the shim's wrapper when preloaded
LaunchFn g_direct = nullptr;        // the same driver function, under an unhooked name

void run(benchmark::State& state, LaunchFn launch) {
  for (auto _ : state) {
    CUresult r = launch(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_launch_direct(benchmark::State& state) { run(state, g_direct); }
void BM_launch_through_shim(benchmark::State& state) { run(state, g_through_shim); }
BENCHMARK(BM_launch_direct)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(BM_launch_through_shim)->ThreadRange(1, 2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (!driver) {
    std::fprintf(stderr, "cannot load libcuda.so.1 (the null driver): %s\n", dlerror());
    return 2;
  }
  g_through_shim = reinterpret_cast<LaunchFn>(dlsym(driver, "cuLaunchKernel"));
  g_direct = reinterpret_cast<LaunchFn>(dlsym(driver, "gpushare_null_launch"));
  auto init = reinterpret_cast<CUresult (*)(unsigned int)>(dlsym(driver, "cuInit"));
  if (!g_through_shim || !g_direct || !init || init(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "the null driver lacks cuInit/cuLaunchKernel/gpushare_null_launch\n");
    return 2;
  }
  // Registered with a daemon (run_launch_overhead.sh's production row): let its first ticks set
  // the completion stride before measuring.
  if (std::getenv("GPUSHARE_SOCKET")) usleep(300'000);
  if (g_through_shim == g_direct)
    std::fprintf(stderr, "warning: libgpushare.so is not preloaded: both rows measure the driver\n");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
