// What one memory declaration and one view publication cost the daemon:
// publish_views and admission read per-device sums a job keeps as allocations come and go, so
// their cost follows jobs x devices, not allocations x devices. Run:
//   build/tools/bench/gpushare_bench_memory_views
// Figures: docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include "memory_broker.h"
#include "registry.h"

namespace {

using namespace gpushare::daemon;

// One job holding `allocations` spread over `devices` devices, each with a control block.
Registry make_registry(int allocations, int devices, MemoryBroker* broker) {
  Registry registry;
  Job job;
  job.id = registry.next_id();
  std::string error;
  job.block =
      SharedControlBlock::create(job.id, gpushare::protocol::JobClass::opportunistic, &error);
  for (int i = 0; i < allocations; ++i)
    job.set_allocation({i % devices, 0x1000ull * (i + 1)},
                       DeclaredAllocation{4096, 0, 0, 0, {}, false});
  registry.add(std::move(job));
  for (int d = 0; d < devices; ++d) broker->physical[d] = uint64_t{80} << 30;
  return registry;
}

// The daemon's work for one declaration: record it, then publish every job's views.
void BM_Declaration(benchmark::State& state) {
  MemoryBroker broker;
  Registry registry =
      make_registry(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), &broker);
  MemoryConfig config;
  Job& job = registry.jobs().begin()->second;
  uint64_t handle = 1ull << 40;
  for (auto _ : state) {
    job.set_allocation({0, handle}, DeclaredAllocation{4096, 0, 0, 0, {}, false});
    publish_views(registry, broker, config);
    job.erase_allocation({0, handle});
  }
}
BENCHMARK(BM_Declaration)->Args({1024, 1})->Args({40960, 1})->Args({4096, 1024});

// One tick's view publication with nothing changed.
void BM_PublishViews(benchmark::State& state) {
  MemoryBroker broker;
  Registry registry =
      make_registry(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), &broker);
  MemoryConfig config;
  for (auto _ : state) publish_views(registry, broker, config);
}
BENCHMARK(BM_PublishViews)->Args({1024, 1})->Args({40960, 1})->Args({1024, 1024});

}  // namespace

BENCHMARK_MAIN();
