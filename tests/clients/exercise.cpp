#include "exercise.h"

#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <vector>

namespace gpushare::clients {

void add_exercise_options(CLI::App& app, ExerciseOptions& o) {
  app.add_option("--launches", o.launches, "calls of each launch entry point and cuGraphLaunch");
  app.add_option("--graph-nodes", o.graph_nodes, "kernel nodes in the launched graph");
  app.add_option("--alloc-rounds", o.alloc_rounds, "rounds of one allocation per path");
  app.add_option("--info-calls", o.info_calls, "calls of cuMemGetInfo_v2 and cuDeviceTotalMem_v2");
  app.add_option("--alloc-device", o.alloc_device, "device the allocations go to");
  app.add_option("--kernel-us", o.kernel_us, "duration of each kernel in microseconds");
  app.add_flag("--ptds", o.per_thread, "per-thread default stream entry points");
}

namespace {

class Exercise {
 public:
  Exercise(const DriverApi& api, const ExerciseOptions& o) : api_(api), o_(o) {}

  nlohmann::json run() {
    result_["calls"] = nlohmann::json::object();
    result_["failed"] = nlohmann::json::object();
    if (setup() && launch() && edge_cases() && allocate() && query_memory()) {
      result_["data_ok"] = data_ok_;
    }
    resolved();
    if (!error_.empty()) result_["error"] = error_;
    return result_;
  }

 private:
  // Counts a call that must succeed; records the first failure.
  bool ok(CUresult r, const char* field) {
    if (r == CUDA_SUCCESS) {
      result_["calls"][field] = result_["calls"].value(field, 0) + 1;
      return true;
    }
    if (error_.empty()) error_ = std::string(field) + " returned " + std::to_string(r);
    return false;
  }
  // Counts a call that must fail with `expected`.
  bool fails(CUresult r, CUresult expected, const char* field) {
    if (r == expected) {
      result_["failed"][field] = result_["failed"].value(field, 0) + 1;
      return true;
    }
    if (error_.empty())
      error_ = std::string(field) + " did not fail as expected: " + std::to_string(r);
    return false;
  }

#define CALL(field, ...) \
  if (!ok(api_.field(__VA_ARGS__), #field)) return false

  bool setup() {
    CALL(init, 0);
    CALL(device_get_count, &devices_);
    if (o_.alloc_device >= devices_)
      return error_ = "no device " + std::to_string(o_.alloc_device), false;
    result_["devices"] = devices_;
    contexts_.resize(devices_);
    streams_.resize(devices_);
    for (int d = 0; d < devices_; ++d) {
      CUdevice dev = 0;
      CALL(device_get, &dev, d);
      CALL(primary_ctx_retain, &contexts_[d], dev);
      CALL(ctx_set_current, contexts_[d]);
      CALL(stream_create, &streams_[d], 0);
    }
    CALL(ctx_set_current, contexts_[0]);
    static const char kImage[] = "gpushare fake module";
    CALL(module_load_data, &module_, kImage);
    std::string name = o_.kernel_us > 0 ? "spin_" + std::to_string(o_.kernel_us) : "noop";
    CALL(module_get_function, &kernel_, module_, name.c_str());
    return true;
  }

  bool launch() {
    CUstream s = streams_[0];
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = s;
    std::vector<CUDA_LAUNCH_PARAMS> per_device(devices_);
    for (int d = 0; d < devices_; ++d) {
      per_device[d] = CUDA_LAUNCH_PARAMS{kernel_, 1, 1, 1, 32, 1, 1, 0, streams_[d], nullptr};
    }
    for (int i = 0; i < o_.launches; ++i) {
      CALL(launch_kernel, kernel_, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr);
      CALL(launch_kernel_ex, &config, kernel_, nullptr, nullptr);
      CALL(launch_cooperative, kernel_, 1, 1, 1, 32, 1, 1, 0, s, nullptr);
      CALL(launch_cooperative_multi, per_device.data(), static_cast<unsigned>(devices_), 0);
    }
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    CALL(graph_create, &graph, 0);
    for (int n = 0; n < o_.graph_nodes; ++n) {
      CUDA_KERNEL_NODE_PARAMS params{};
      params.func = kernel_;
      params.gridDimX = params.gridDimY = params.gridDimZ = 1;
      params.blockDimX = 32;
      params.blockDimY = params.blockDimZ = 1;
      CUgraphNode node = nullptr;
      CALL(graph_add_kernel_node, &node, graph, nullptr, 0, &params);
    }
    CALL(graph_instantiate, &exec, graph, 0);
    for (int i = 0; i < o_.launches; ++i) CALL(graph_launch, exec, s);
    CALL(stream_synchronize, s);
    CALL(graph_exec_destroy, exec);
    CALL(graph_destroy, graph);
    return true;
  }

  // One failing call of a launch and of an allocation, which the shim must count as failed, and
  // a free of 0, which succeeds (as on the real driver) and frees nothing.
  bool edge_cases() {
    CALL(mem_free, 0);
    if (!fails(api_.launch_kernel(kernel_, 0, 1, 1, 32, 1, 1, 0, streams_[0], nullptr, nullptr),
               CUDA_ERROR_INVALID_VALUE, "launch_kernel")) {
      return false;
    }
    CUdeviceptr p = 0;
    return fails(api_.mem_alloc(&p, 0), CUDA_ERROR_INVALID_VALUE, "mem_alloc");
  }

  // Writes a pattern to device memory and reads it back.
  bool round_trip(CUdeviceptr p, size_t bytes) {
    std::vector<unsigned char> out(bytes), in(bytes);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 1);
    CALL(memcpy_htod, p, out.data(), bytes);
    CALL(memcpy_dtoh, in.data(), p, bytes);
    data_ok_ = data_ok_ && in == out;
    return true;
  }

  bool allocate() {
    const int d = o_.alloc_device;
    CUstream s = streams_[d];
    CALL(ctx_set_current, contexts_[d]);
    CUmemoryPool pool = nullptr;
    CALL(device_get_default_mem_pool, &pool, d);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    size_t granularity = 0;
    CALL(mem_get_allocation_granularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (kCreateBytes % granularity != 0) return error_ = "unexpected VMM granularity", false;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

    uint64_t round_bytes = 0;
    for (int r = 0; r < o_.alloc_rounds; ++r) {
      CUdeviceptr plain = 0, pitched = 0, managed = 0, async = 0, pooled = 0, va = 0;
      size_t pitch = 0;
      CUmemGenericAllocationHandle handle = 0;
      CALL(mem_alloc, &plain, kAllocBytes);
      CALL(mem_alloc_pitch, &pitched, &pitch, kPitchWidth, kPitchHeight, 4);
      CALL(mem_alloc_managed, &managed, kManagedBytes, CU_MEM_ATTACH_GLOBAL);
      CALL(mem_alloc_async, &async, kAsyncBytes, s);
      CALL(mem_alloc_from_pool_async, &pooled, kPoolBytes, pool, s);
      CALL(mem_create, &handle, kCreateBytes, &prop, 0);
      round_bytes = kAllocBytes + pitch * kPitchHeight + kManagedBytes + kAsyncBytes + kPoolBytes +
                    kCreateBytes;
      result_["pitch"] = pitch;
      if (!round_trip(plain, 4096)) return false;
      // Expandable-segments style: map the physical memory into a reserved range and use it.
      CALL(mem_address_reserve, &va, kCreateBytes, 0, 0, 0);
      CALL(mem_map, va, kCreateBytes, 0, handle, 0);
      CALL(mem_set_access, va, kCreateBytes, &access, 1);
      if (!round_trip(va, 4096)) return false;
      CALL(mem_unmap, va, kCreateBytes);
      CALL(mem_address_free, va, kCreateBytes);
      if (r + 1 == o_.alloc_rounds) break;  // the last round stays live until exit
      CALL(mem_free, plain);
      CALL(mem_free, pitched);
      CALL(mem_free, managed);
      CALL(mem_free_async, async, s);
      CALL(mem_free_async, pooled, s);
      CALL(mem_release, handle);
    }
    uint64_t peak = round_bytes;
    if (o_.alloc_rounds > 0) {
      CUdeviceptr extra = 0;
      CALL(mem_alloc, &extra, kPeakExtraBytes);
      CALL(mem_free, extra);
      peak += kPeakExtraBytes;
    }
    result_["live_bytes"] = round_bytes;
    result_["peak_bytes"] = peak;
    return true;
  }

  bool query_memory() {
    size_t free_bytes = 0, total = 0, device_total = 0;
    for (int i = 0; i < o_.info_calls; ++i) {
      CALL(mem_get_info, &free_bytes, &total);
      CALL(device_total_mem, &device_total, o_.alloc_device);
    }
    result_["mem_get_info"] = {{"free", free_bytes}, {"total", total}};
    result_["device_total_mem"] = device_total;
    CALL(ctx_synchronize);
    CALL(ctx_set_current, contexts_[0]);
    return true;
  }
#undef CALL

  void resolved() {
    nlohmann::json& r = result_["resolved"];
#define CLIENT_RESOLVED(field, base, exact, per_thread)                          \
  r[#field] = {{"symbol", symbol_of(reinterpret_cast<const void*>(api_.field))}, \
               {"object", object_of(reinterpret_cast<const void*>(api_.field))}};
    CLIENT_DRIVER_API(CLIENT_RESOLVED)
#undef CLIENT_RESOLVED
  }

  const DriverApi& api_;
  const ExerciseOptions& o_;
  nlohmann::json result_;
  std::string error_;
  int devices_ = 0;
  std::vector<CUcontext> contexts_;
  std::vector<CUstream> streams_;
  CUmodule module_ = nullptr;
  CUfunction kernel_ = nullptr;
  bool data_ok_ = true;
};
}  // namespace

nlohmann::json run_exercise(const DriverApi& api, const ExerciseOptions& options) {
  return Exercise(api, options).run();
}

int print_result(const nlohmann::json& result) {
  std::cout << result.dump() << std::endl;
  return result.contains("error") ? 1 : 0;
}
}  // namespace gpushare::clients
