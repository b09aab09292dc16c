// Fake driver: modules, kernels, launches and graphs. By default a launch runs its kernel on the
// simulated device's one engine and returns when the kernel is done (synchronous: the fake's
// documented simplification). With GPUSHARE_FAKE_ASYNC_KERNELS=1 every launch (cuLaunchKernel,
// cuLaunchKernelEx, cuLaunchCooperativeKernel, their _ptsz variants, the multi-device cooperative
// launch and cuGraphLaunch(_ptsz), one queued kernel per graph node) queues its kernels on the
// device's kernel queue and returns at once; kernel_queue.h describes the queue.
#include <cstdlib>
#include <cstring>

#include "driver_objects.h"
#include "simulated_device.h"

namespace gpushare::fake {
namespace {

// "spin_<microseconds>" -> that duration; any other name -> 0.
uint64_t kernel_duration_ns(const char* name) {
  constexpr const char kPrefix[] = "spin_";
  if (std::strncmp(name, kPrefix, sizeof(kPrefix) - 1) != 0) return 0;
  const char* digits = name + sizeof(kPrefix) - 1;
  char* end = nullptr;
  unsigned long long us = std::strtoull(digits, &end, 10);
  if (end == digits || *end != '\0') return 0;
  return us * 1000ull;
}

// Runs a kernel now (sync mode), or queues it behind the stream's earlier work (async mode) and
// moves the stream's tail to it.
void submit(CUstream stream, int device, uint64_t duration_ns) {
  if (!async_kernels()) return run_kernel(device, duration_ns);
  const uint64_t position = enqueue_kernel(device, duration_ns);
  if (Stream* s = as<Stream>(stream)) {
    // Two threads may launch into one stream: the tail only moves forward.
    uint64_t tail = s->last_kernel.load(std::memory_order_relaxed);
    while (tail < position && !s->last_kernel.compare_exchange_weak(tail, position)) {
    }
  }
}

bool valid_grid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  return gx != 0 && gy != 0 && gz != 0 && bx != 0 && by != 0 && bz != 0;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, CUstream stream) {
  REQUIRE_INIT();
  Function* kernel = as<Function>(f);
  if (kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!valid_grid(gx, gy, gz, bx, by, bz)) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  if (CUresult r; capture_kernels(stream, {kernel}, &r)) return r;
  submit(stream, device, kernel->duration_ns);
  return CUDA_SUCCESS;
}

CUresult launch_ex(const CUlaunchConfig* config, CUfunction f) {
  if (config == nullptr)
    return initialized() ? CUDA_ERROR_INVALID_VALUE : driver_state();
  return launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->hStream);
}

CUresult graph_launch(CUgraphExec exec, CUstream stream) {
  REQUIRE_INIT();
  GraphExec* g = as<GraphExec>(exec);
  if (g == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  if (CUresult r; capture_kernels(stream, g->kernels, &r)) return r;
  for (const Function* kernel : g->kernels) submit(stream, device, kernel->duration_ns);
  return CUDA_SUCCESS;
}
}  // namespace
}  // namespace gpushare::fake

using namespace gpushare::fake;

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  REQUIRE_INIT();
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *module = reinterpret_cast<CUmodule>(new Module);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  REQUIRE_INIT();
  Module* m = as<Module>(module);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& f : m->functions) *const_cast<volatile Tag*>(&f->tag) = Tag::dead;
  destroy(m);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  REQUIRE_INIT();
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = as<Module>(module);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(m->lock);
  for (auto& f : m->functions) {
    if (f->name == name) return *function = reinterpret_cast<CUfunction>(f.get()), CUDA_SUCCESS;
  }
  auto f = std::make_unique<Function>();
  f->name = name;
  f->duration_ns = kernel_duration_ns(name);
  *function = reinterpret_cast<CUfunction>(f.get());
  m->functions.push_back(std::move(f));
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int /*shmem*/,
                        CUstream stream, void** /*params*/, void** /*extra*/) {
  return launch(f, gx, gy, gz, bx, by, bz, stream);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int /*shmem*/, CUstream stream, void** /*params*/,
                             void** /*extra*/) {
  return launch(f, gx, gy, gz, bx, by, bz, stream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** /*params*/,
                          void** /*extra*/) {
  return launch_ex(config, f);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** /*params*/,
                               void** /*extra*/) {
  return launch_ex(config, f);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int /*shmem*/, CUstream stream, void** /*params*/) {
  return launch(f, gx, gy, gz, bx, by, bz, stream);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int /*shmem*/, CUstream stream,
                                        void** /*params*/) {
  return launch(f, gx, gy, gz, bx, by, bz, stream);
}

// One kernel per listed device; each entry's stream (never a default stream) names the device.
CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* list, unsigned int devices,
                                              unsigned int /*flags*/) {
  REQUIRE_INIT();
  if (list == nullptr || devices == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < devices; ++i) {
    if (as<Function>(list[i].function) == nullptr || as<Stream>(list[i].hStream) == nullptr) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!valid_grid(list[i].gridDimX, list[i].gridDimY, list[i].gridDimZ, list[i].blockDimX,
                    list[i].blockDimY, list[i].blockDimZ)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; i < devices; ++i) {
    submit(list[i].hStream, as<Stream>(list[i].hStream)->context->device,
           as<Function>(list[i].function)->duration_ns);
  }
  return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  REQUIRE_INIT();
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(new Graph);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* /*deps*/,
                                 size_t /*dep_count*/, const CUDA_KERNEL_NODE_PARAMS* params) {
  REQUIRE_INIT();
  if (node == nullptr || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = as<Graph>(graph);
  Function* kernel = as<Function>(params->func);
  if (g == nullptr || kernel == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto n = std::make_unique<GraphNode>();
  n->kernel = kernel;
  *node = reinterpret_cast<CUgraphNode>(n.get());
  g->nodes.push_back(std::move(n));
  return CUDA_SUCCESS;
}

// The CUDA 10 entry point: its parameter struct is a prefix of the _v2 one.
CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                              size_t dep_count, const CUDA_KERNEL_NODE_PARAMS_v1* params) {
  if (params == nullptr)
    return initialized() ? CUDA_ERROR_INVALID_VALUE : driver_state();
  CUDA_KERNEL_NODE_PARAMS v2{};
  v2.func = params->func;
  return cuGraphAddKernelNode_v2(node, graph, deps, dep_count, &v2);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                     unsigned long long /*flags*/) {
  REQUIRE_INIT();
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = as<Graph>(graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;  // instantiation needs a context; the launch's stream picks the device
  if (CUresult r = current_device(&device); r != CUDA_SUCCESS) return r;
  auto* e = new GraphExec;
  for (auto& n : g->nodes) e->kernels.push_back(n->kernel);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

// Counts (and lists, up to *count) the graph's nodes, in the order they were added.
CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  REQUIRE_INIT();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = as<Graph>(graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (nodes != nullptr)
    for (size_t i = 0; i < *count && i < g->nodes.size(); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(g->nodes[i].get());
  *count = g->nodes.size();
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  return graph_launch(exec, stream);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return graph_launch(exec, stream);
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  REQUIRE_INIT();
  GraphExec* e = as<GraphExec>(exec);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  destroy(e);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  REQUIRE_INIT();
  Graph* g = as<Graph>(graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  destroy(g);
  return CUDA_SUCCESS;
}
}  // extern "C"
