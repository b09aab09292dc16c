// The fake driver in one process: cuGetProcAddress answers like the real driver, memory is
// accounted on the simulated device (OOM, managed oversubscription, VMM aliasing), kernels and
// graphs run on the engine and are counted. main() points the fake at a fresh device file with
// two devices of 1 GiB before any test runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "cuda_api.h"
#include "fake_device_view.h"
#include "hooks.h"
#include "subprocess.h"

extern "C" {
nvmlReturn_t nvmlInit_v2();
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
}

namespace {

constexpr uint64_t kCapacity = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

void* address(const char* base, int version, cuuint64_t flags,
              CUdriverProcAddressQueryResult* status = nullptr) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult s{};
  CUresult r = cuGetProcAddress_v2(base, &p, version, flags, &s);
  if (status != nullptr) *status = s;
  return r == CUDA_SUCCESS ? p : nullptr;
}

template <class F>
void* fn(F* f) {
  return reinterpret_cast<void*>(f);
}

// The base name a program asks cuGetProcAddress for, and with which flag, to get `symbol`.
std::pair<std::string, cuuint64_t> base_of(std::string symbol) {
  cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT;
  if (symbol.ends_with("_ptsz")) {
    symbol.resize(symbol.size() - 5);
    flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  }
  if (symbol.ends_with("_v2")) symbol.resize(symbol.size() - 3);
  return {symbol, flags};
}

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);  // creates the device file on first use
    view_.emplace();
    ASSERT_TRUE(view_->ok());
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    static const char kImage[] = "module";
    ASSERT_EQ(cuModuleLoadData(&module_, kImage), CUDA_SUCCESS);
  }
  void TearDown() override { cuModuleUnload(module_); }

  CUfunction kernel(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module_, name), CUDA_SUCCESS);
    return f;
  }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::optional<gpushare::fake::DeviceView> view_;
};

TEST(ProcAddress, VersionedNamesMapToTheNewestTheVersionAllows) {
  EXPECT_EQ(address("cuMemAlloc", 13000, 0), fn(&cuMemAlloc_v2));
  EXPECT_EQ(address("cuGetProcAddress", 12000, 0), fn(&cuGetProcAddress_v2));
  EXPECT_EQ(address("cuGetProcAddress", 11080, 0), fn(&cuGetProcAddress));
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(address("cuMemAlloc", 3000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(ProcAddress, PerThreadFlagPicksPtszWhereOneExists) {
  const cuuint64_t ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  EXPECT_EQ(address("cuLaunchKernel", 13000, ptds), fn(&cuLaunchKernel_ptsz));
  EXPECT_EQ(address("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM),
            fn(&cuLaunchKernel));
  EXPECT_EQ(address("cuMemcpyHtoD", 13000, ptds), fn(&cuMemcpyHtoD_v2_ptds));
  EXPECT_EQ(address("cuMemAlloc", 13000, ptds), fn(&cuMemAlloc_v2));
}

TEST(ProcAddress, UnknownNamesAreNotFound) {
  void* p = &p;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(cuGetProcAddress_v2("cuNoSuchThing", &p, 13000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(cuGetProcAddress("cuLaunchKernel_ptsz", &p, 13000, 0), CUDA_ERROR_NOT_FOUND)
      << "callers ask for base names, never for a versioned one";
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", nullptr, 13000, 0, &status), CUDA_ERROR_INVALID_VALUE);
}

// The hooked entry points a newer one replaced under the same base name, with a version that
// still gets them.
const std::pair<const char*, int> kReplaced[] = {{"cuGetProcAddress", 11080},
                                                 {"cuStreamBeginCapture", 10000},
                                                 {"cuStreamBeginCapture_ptsz", 10000}};

// Every CUDA symbol of the shim's hook table is reachable through cuGetProcAddress, as on the
// real driver: otherwise a cudart-style client could not exercise it.
TEST(ProcAddress, EveryHookedSymbolIsReachable) {
#define GPUSHARE_X(family, lib, name, ret, params, args) {#name, fn(&name)},
  const std::pair<const char*, void*> hooked[] = {GPUSHARE_CUDA_HOOKS(GPUSHARE_X)};
#undef GPUSHARE_X
  for (const auto& [name, entry] : hooked) {
    auto [base, flags] = base_of(name);
    int version = CUDA_VERSION;
    for (const auto& [old_name, served_until] : kReplaced)
      if (std::strcmp(name, old_name) == 0) version = served_until;
    EXPECT_EQ(address(base.c_str(), version, flags), entry) << name;
  }
}

// Before cuInit everything but version and symbol queries fails, as on the real driver. Runs in
// a fresh process (death-test style), where nothing has called cuInit yet.
TEST(Initialisation, CallsBeforeCuInitFail) {
  EXPECT_EXIT(
      {
        CUdeviceptr p = 0;
        int version = 0;
        void* entry = nullptr;
        bool ok = cuMemAlloc_v2(&p, 1) == CUDA_ERROR_NOT_INITIALIZED &&
                  cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) ==
                      CUDA_ERROR_NOT_INITIALIZED &&
                  cuDriverGetVersion(&version) == CUDA_SUCCESS && version == CUDA_VERSION &&
                  cuGetProcAddress("cuInit", &entry, 13000, 0) == CUDA_SUCCESS &&
                  cuInit(0) == CUDA_SUCCESS;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(FakeDriver, MemoryIsAccountedAndRunsOut) {
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_before, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kCapacity);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 100 * kMiB), CUDA_SUCCESS);
  size_t free_after = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_after, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_before - free_after, 100 * kMiB);
  EXPECT_EQ(view_->bytes_of_pid(0, getpid()), kCapacity - free_after);

  // NVML sees the same device memory.
  nvmlDevice_t device = nullptr;
  nvmlMemory_t m{};
  ASSERT_EQ(nvmlInit_v2(), kNvmlSuccess);
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &device), kNvmlSuccess);
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device, &m), kNvmlSuccess);
  EXPECT_EQ(m.total, kCapacity);
  EXPECT_EQ(m.free, free_after);

  // Contents are real.
  std::vector<int> in(1000), out(1000);
  for (int i = 0; i < 1000; ++i) in[i] = i * i;
  ASSERT_EQ(cuMemcpyHtoD_v2(p, in.data(), 4000), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH_v2(out.data(), p, 4000), CUDA_SUCCESS);
  EXPECT_EQ(in, out);

  CUdeviceptr too_big = 0;
  EXPECT_EQ(cuMemAlloc_v2(&too_big, free_after + 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE) << "double free";
  EXPECT_EQ(cuMemFree_v2(0), CUDA_SUCCESS) << "freeing 0 is a no-op, as on the real driver";
  EXPECT_EQ(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemGetInfo_v2(&free_after, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_after, free_before);
}

// Managed memory oversubscribes (it is not limited by the capacity) and takes hints.
TEST_F(FakeDriver, ManagedMemoryOversubscribes) {
  CUdeviceptr managed = 0, plain = 0;
  ASSERT_EQ(cuMemAllocManaged(&managed, 2 * kCapacity, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  size_t free_bytes = 1, total = 0;
  ASSERT_EQ(cuMemGetInfo_v2(&free_bytes, &total), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 0u);
  EXPECT_EQ(view_->managed_bytes(0), 2 * kCapacity);
  EXPECT_EQ(cuMemAlloc_v2(&plain, kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemLocation device{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  EXPECT_EQ(cuMemAdvise_v2(managed, kMiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, device),
            CUDA_SUCCESS);
  EXPECT_EQ(cuMemPrefetchAsync_v2(managed, kMiB, device, 0, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(managed), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc_v2(&plain, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAdvise(plain, kMiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 0),
            CUDA_ERROR_INVALID_VALUE)
      << "hints are for managed memory only";
  EXPECT_EQ(cuMemFree_v2(plain), CUDA_SUCCESS);
}

// Prefetching a whole managed allocation to the host frees its device memory, so a device
// allocation that did not fit now does; prefetching it back takes the memory again. Contents
// stay (the bytes never move in the fake). The memory swap (docs/memory.md) relies on this model.
TEST_F(FakeDriver, ManagedPrefetchModelsDeviceResidency) {
  CUdeviceptr managed = 0, plain = 0;
  const uint64_t big = kCapacity / 10 * 8;
  const uint64_t used_before = view_->used_bytes(0);
  ASSERT_EQ(cuMemAllocManaged(&managed, big, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  std::memset(reinterpret_cast<void*>(managed), 0x5a, 4096);
  EXPECT_EQ(cuMemAlloc_v2(&plain, kCapacity / 10 * 6), CUDA_ERROR_OUT_OF_MEMORY);
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0}, device{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  ASSERT_EQ(cuMemPrefetchAsync_v2(managed, big, host, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(view_->managed_bytes(0), 0u);
  ASSERT_EQ(cuMemAlloc_v2(&plain, kCapacity / 10 * 6), CUDA_SUCCESS);
  // Back to the device beyond the capacity: unified memory oversubscribes, it does not fail.
  ASSERT_EQ(cuMemPrefetchAsync(managed, big, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(view_->managed_bytes(0), big);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(managed)[4095], 0x5a);
  ASSERT_EQ(cuMemPrefetchAsync(managed, big, CU_DEVICE_CPU, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPrefetchAsync_v2(managed, big, device, 0, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(view_->managed_bytes(0), big);
  ASSERT_EQ(cuMemPrefetchAsync(managed, big, CU_DEVICE_CPU, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(managed), CUDA_SUCCESS);  // host-resident: frees no device memory twice
  ASSERT_EQ(cuMemFree_v2(plain), CUDA_SUCCESS);
  EXPECT_EQ(view_->used_bytes(0), used_before);
}

TEST_F(FakeDriver, PitchRowsAreAligned) {
  CUdeviceptr p = 0;
  size_t pitch = 0;
  ASSERT_EQ(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(view_->bytes_of_pid(0, getpid()), 10240u);
  EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
}

// Expandable segments: one physical allocation mapped at two addresses aliases the same bytes,
// and the mapping outlives cuMemRelease (which ends the accounting).
TEST_F(FakeDriver, VmmMappingsAliasPhysicalMemory) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  size_t granule = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cuMemCreate(&handle, granule + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemCreate(&handle, granule, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(view_->bytes_of_pid(0, getpid()), granule);

  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 4 * granule, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&b, granule, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(a % granule, 0u);
  CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  for (CUdeviceptr at : {a + granule, b}) {
    ASSERT_EQ(cuMemMap(at, granule, 0, handle, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemSetAccess(at, granule, &access, 1), CUDA_SUCCESS);
  }
  const char text[] = "written through one mapping";
  ASSERT_EQ(cuMemcpyHtoD_v2(a + granule, text, sizeof text), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(view_->bytes_of_pid(0, getpid()), 0u);
  ASSERT_EQ(cuMemUnmap(a + granule, granule), CUDA_SUCCESS);
  char read_back[sizeof text] = {};
  ASSERT_EQ(cuMemcpyDtoH_v2(read_back, b, sizeof text), CUDA_SUCCESS);
  EXPECT_STREQ(read_back, text);
  EXPECT_EQ(cuMemUnmap(b, granule), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 4 * granule), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(b, granule), CUDA_SUCCESS);
}

TEST_F(FakeDriver, KernelsHoldTheEngineForTheirDuration) {
  const uint64_t kernels = view_->kernels(0), busy = view_->busy_ns(0);
  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(cuEventCreate(&start, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&end, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(start, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(kernel("spin_20000"), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(end, nullptr), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime_v2(&ms, start, end), CUDA_SUCCESS);
  EXPECT_GE(ms, 20.0f) << "a launch returns when its kernel is done";
  EXPECT_EQ(view_->kernels(0), kernels + 1);
  EXPECT_GE(view_->busy_ns(0) - busy, 20'000'000u);
  EXPECT_EQ(view_->tickets_taken(0), view_->tickets_served(0));
  cuEventDestroy_v2(start);
  cuEventDestroy_v2(end);
}

// The default, without GPUSHARE_FAKE_ASYNC_KERNELS: a launch returns when its kernel is done, so
// the stream and an event recorded after it are complete at once (async_kernels_test.cpp has the
// other mode).
TEST_F(FakeDriver, LaunchesAreSynchronousByDefault) {
  CUstream stream = nullptr;
  CUevent event = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&event, 0), CUDA_SUCCESS);
  const uint64_t kernels = view_->kernels(0);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(cuLaunchKernel(kernel("spin_20000"), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_EQ(view_->kernels(0), kernels + 1);
  ASSERT_EQ(cuEventRecord(event, stream), CUDA_SUCCESS);
  EXPECT_EQ(cuEventQuery(event), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_SUCCESS);
  cuEventDestroy_v2(event);
  cuStreamDestroy_v2(stream);
}

TEST_F(FakeDriver, GraphAndMultiDeviceLaunchesRunEveryKernel) {
  CUfunction f = kernel("noop");
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphCreate(&graph, 0), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = f;
  for (int i = 0; i < 3; ++i) {
    CUgraphNode node = nullptr;
    ASSERT_EQ(cuGraphAddKernelNode_v2(&node, graph, nullptr, 0, &params), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  uint64_t before = view_->kernels(0);
  ASSERT_EQ(cuGraphLaunch_ptsz(exec, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 3);

  std::vector<CUstream> streams(2);
  for (int d = 0; d < 2; ++d) {
    CUcontext c = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(c), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&streams[d], 0), CUDA_SUCCESS);
  }
  CUDA_LAUNCH_PARAMS list[2] = {{f, 1, 1, 1, 1, 1, 1, 0, streams[0], nullptr},
                                {f, 1, 1, 1, 1, 1, 1, 0, streams[1], nullptr}};
  uint64_t on0 = view_->kernels(0), on1 = view_->kernels(1);
  ASSERT_EQ(cuLaunchCooperativeKernelMultiDevice(list, 2, 0), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), on0 + 1);
  EXPECT_EQ(view_->kernels(1), on1 + 1);
  EXPECT_EQ(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
}

TEST_F(FakeDriver, ConcurrentThreadsLoseNoKernel) {
  CUfunction f = kernel("noop");
  const uint64_t before = view_->kernels(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      cuCtxSetCurrent(ctx_);
      for (int i = 0; i < 2000; ++i) {
        cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, nullptr, nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(view_->kernels(0), before + 16000);
  EXPECT_EQ(view_->tickets_taken(0), view_->tickets_served(0));
}

// Stream capture: launches into a capturing stream become a graph that runs them when launched.
TEST_F(FakeDriver, AStreamCaptureRecordsItsLaunchesAsAGraph) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  const uint64_t before = view_->kernels(0);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_ILLEGAL_STATE);
  CUstreamCaptureStatus status{};
  ASSERT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(cuLaunchKernel(kernel("noop"), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
              CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before) << "a captured launch runs nothing";
  CUgraph graph = nullptr;
  ASSERT_EQ(cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  size_t nodes = 0;
  ASSERT_EQ(cuGraphGetNodes(graph, nullptr, &nodes), CUDA_SUCCESS);
  EXPECT_EQ(nodes, 3u);
  ASSERT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_ILLEGAL_STATE);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  EXPECT_EQ(view_->kernels(0), before + 3);
  EXPECT_EQ(cuStreamBeginCapture_v2(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
      << "the legacy stream cannot capture";
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  cuStreamDestroy_v2(stream);
}

// A call `call` makes on a thread of its own, in capture mode `mode`, with the context current.
CUresult on_other_thread(CUcontext ctx, CUstreamCaptureMode mode, CUresult (*call)()) {
  CUresult result = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    cuCtxSetCurrent(ctx);
    CUstreamCaptureMode m = mode;
    cuThreadExchangeStreamCaptureMode(&m);
    result = call();
  }).join();
  return result;
}

CUresult synchronise() {
  return cuCtxSynchronize();
}
CUresult allocate() {
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, kMiB);
  if (r == CUDA_SUCCESS) cuMemFree_v2(p);
  return r;
}

CUstreamCaptureStatus capture_status(CUstream stream) {
  CUstreamCaptureStatus status{};
  EXPECT_EQ(cuStreamIsCapturing(stream, &status), CUDA_SUCCESS);
  return status;
}

// A context synchronisation invalidates the captures of its device, from any thread in any mode;
// the capture's launches then fail and its end hands over no graph.
TEST_F(FakeDriver, AContextSynchronisationInvalidatesEveryCaptureOfItsDevice) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_EQ(on_other_thread(ctx_, CU_STREAM_CAPTURE_MODE_RELAXED, synchronise),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(capture_status(stream), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(cuLaunchKernel(kernel("noop"), 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
            CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CUgraph graph = reinterpret_cast<CUgraph>(&graph);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS) << "no capture in progress any more";
  cuStreamDestroy_v2(stream);
}

// "Potentially unsafe" calls (here an allocation) follow cuThreadExchangeStreamCaptureMode's rules.
TEST_F(FakeDriver, UnsafeCallsBesideACaptureFollowTheModeRules) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  struct Case {
    CUstreamCaptureMode capture, caller;
    bool refused;
  };
  for (Case c : {Case{CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_GLOBAL, true},
                 Case{CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, false},
                 Case{CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED, false},
                 Case{CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL, false},
                 Case{CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_GLOBAL, false}}) {
    SCOPED_TRACE(std::to_string(c.capture) + " beside " + std::to_string(c.caller));
    ASSERT_EQ(cuStreamBeginCapture_v2(stream, c.capture), CUDA_SUCCESS);
    EXPECT_EQ(on_other_thread(ctx_, c.caller, allocate),
              c.refused ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS);
    EXPECT_EQ(capture_status(stream),
              c.refused ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUgraph graph = nullptr;
    cuStreamEndCapture(stream, &graph);
    if (graph) cuGraphDestroy(graph);
  }
  // The capturing thread itself may not, unless it captures in relaxed mode.
  ASSERT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
  EXPECT_EQ(allocate(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph = nullptr;
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Work on the legacy stream would join the capture.
  CUdeviceptr managed = 0;
  ASSERT_EQ(cuMemAllocManaged(&managed, kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
  EXPECT_EQ(cuMemPrefetchAsync_v2(managed, kMiB, host, 0, nullptr),
            CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  EXPECT_EQ(cuStreamEndCapture(stream, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  cuMemFree_v2(managed);
  cuStreamDestroy_v2(stream);
}

}  // namespace

int main(int argc, char** argv) {
  // One fresh simulated machine for this process (and its death-test children).
  static gpushare::testing::TempDir dir;
  setenv("GPUSHARE_FAKE_DEVICE_FILE", dir.file("device").c_str(), 0);
  setenv("GPUSHARE_FAKE_DEVICES", "2", 1);
  setenv("GPUSHARE_FAKE_MEMORY", "1G", 1);
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return RUN_ALL_TESTS();
}
