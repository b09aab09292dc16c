// A CUDA program for the memory tests, run with the shim preloaded on the fake driver. It loads
// libcuda.so.1 (and libnvidia-ml.so.1) the way programs do and obeys one command per line on
// stdin, answering one line on stdout:
//
// clang-format off
//   init                     cuInit + context + module                -> "ok"
//   alloc <bytes>            cuMemAlloc_v2                            -> "ok <pointer>" / "error <CUresult>"
//   free <pointer>           cuMemFree_v2                             -> "ok"
//   fill <pointer> <bytes> <seed>  a pseudo-random pattern, cuMemcpyHtoD -> "ok"
//   checksum <pointer> <bytes>     read back with cuMemcpyDtoH          -> "ok <fnv1a-64 hex>"
//   meminfo                  cuMemGetInfo_v2                          -> "ok <free> <total>"
//   totalmem                 cuDeviceTotalMem_v2 of device 0          -> "ok <bytes>"
//   nvml                     nvmlDeviceGetMemoryInfo, device 0        -> "ok <free> <total> <used>"
//   launch <count> <us>      cuLaunchKernel spin_<us>                 -> "ok"
//   block                    the shim's control block                 -> "block <paused> <residency>"
//   capture-begin <mode>     cuStreamBeginCapture_v2 on the client's stream, mode global |
//                            thread_local | relaxed                   -> "ok" / "error <CUresult>"
//   capture-launch <count> <us>  cuLaunchKernel spin_<us> into it     -> "ok" / "error <CUresult>"
//   capture-end              cuStreamEndCapture                       -> "ok <nodes>" / "error <r>"
//   graph-launch             instantiates the last captured graph and
//                            launches it (cuGraphLaunch)              -> "ok"
//   thread-mode <mode>       cuThreadExchangeStreamCaptureMode        -> "ok"
// clang-format on
#include <dlfcn.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpushare/protocol/control_block.h"

#include "probe_driver.h"

namespace {

struct NvmlMemory {
  unsigned long long total, free, used;
};

// The probe's calls, and the ones only the memory tests make.
struct Driver : gpushare::clients::ProbeDriver {
  decltype(&cuMemcpyHtoD_v2) htod = nullptr;
  decltype(&cuMemcpyDtoH_v2) dtoh = nullptr;
  decltype(&cuMemGetInfo_v2) mem_get_info = nullptr;
  decltype(&cuDeviceTotalMem_v2) total_mem = nullptr;
  decltype(&cuStreamCreate) stream_create = nullptr;
  decltype(&cuStreamBeginCapture_v2) begin_capture = nullptr;
  decltype(&cuStreamEndCapture) end_capture = nullptr;
  decltype(&cuGraphGetNodes) graph_nodes = nullptr;
  decltype(&cuGraphInstantiateWithFlags) instantiate = nullptr;
  decltype(&cuGraphLaunch) graph_launch = nullptr;
  decltype(&cuThreadExchangeStreamCaptureMode) exchange_mode = nullptr;
  int (*nvml_init)() = nullptr;
  int (*nvml_handle)(unsigned int, void**) = nullptr;
  int (*nvml_memory)(void*, NvmlMemory*) = nullptr;
};

using gpushare::clients::resolve;

// The shim's control block, found like a debugger would: its memfd mapping in /proc/self/maps
// (the last one mapped is the one in force).
const gpushare::protocol::ControlBlock* control_block() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const gpushare::protocol::ControlBlock* found = nullptr;
  while (std::getline(maps, line)) {
    if (line.find("/memfd:gpushare-control") == std::string::npos) continue;
    uintptr_t start = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-", &start) == 1)
      found = reinterpret_cast<const gpushare::protocol::ControlBlock*>(start);
  }
  return found;
}

uint64_t fnv1a(const std::vector<unsigned char>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

bool capture_mode(const std::string& name, CUstreamCaptureMode* mode) {
  if (name == "global") return *mode = CU_STREAM_CAPTURE_MODE_GLOBAL, true;
  if (name == "thread_local") return *mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, true;
  if (name == "relaxed") return *mode = CU_STREAM_CAPTURE_MODE_RELAXED, true;
  return false;
}

struct Client {
  Driver cu{};
  CUmodule module = nullptr;
  CUstream stream = nullptr;  // the one the capture commands use, made on first use
  CUgraph graph = nullptr;    // the last captured graph

  std::string error(CUresult r) { return "error " + std::to_string(static_cast<int>(r)); }

  // `count` launches of spin_<us> into `into`.
  std::string launch(int count, int us, CUstream into) {
    CUfunction f;
    std::string name = "spin_" + std::to_string(us);
    if (cu.module_get_function(&f, module, name.c_str()) != CUDA_SUCCESS) return "error function";
    for (int i = 0; i < count; ++i)
      if (CUresult r = cu.launch_kernel(f, 1, 1, 1, 1, 1, 1, 0, into, nullptr, nullptr);
          r != CUDA_SUCCESS)
        return error(r);
    return "ok";
  }

  std::string run(const std::string& line) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "init") {
      std::string error = gpushare::clients::init_context(cu, &module);
      return error.empty() ? "ok" : error;
    }
    if (command == "alloc") {
      size_t bytes = 0;
      in >> bytes;
      CUdeviceptr p = 0;
      CUresult r = cu.mem_alloc(&p, bytes);
      return r == CUDA_SUCCESS ? "ok " + std::to_string(p) : error(r);
    }
    if (command == "free") {
      unsigned long long p = 0;
      in >> p;
      CUresult r = cu.mem_free(static_cast<CUdeviceptr>(p));
      return r == CUDA_SUCCESS ? "ok" : error(r);
    }
    if (command == "fill" || command == "checksum") {
      unsigned long long p = 0;
      size_t bytes = 0;
      uint64_t seed = 0;
      in >> p >> bytes >> seed;
      std::vector<unsigned char> host(bytes);
      if (command == "fill") {
        uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
        for (auto& b : host) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
          b = static_cast<unsigned char>(x);
        }
        CUresult r = cu.htod(static_cast<CUdeviceptr>(p), host.data(), bytes);
        return r == CUDA_SUCCESS ? "ok" : error(r);
      }
      CUresult r = cu.dtoh(host.data(), static_cast<CUdeviceptr>(p), bytes);
      if (r != CUDA_SUCCESS) return error(r);
      char text[32];
      std::snprintf(text, sizeof text, "%016" PRIx64, fnv1a(host));
      return std::string("ok ") + text;
    }
    if (command == "meminfo") {
      size_t free_bytes = 0, total = 0;
      CUresult r = cu.mem_get_info(&free_bytes, &total);
      return r == CUDA_SUCCESS ? "ok " + std::to_string(free_bytes) + " " + std::to_string(total)
                               : error(r);
    }
    if (command == "totalmem") {
      size_t total = 0;
      CUresult r = cu.total_mem(&total, 0);
      return r == CUDA_SUCCESS ? "ok " + std::to_string(total) : error(r);
    }
    if (command == "nvml") {
      void* device = nullptr;
      NvmlMemory m{};
      if (!cu.nvml_init || cu.nvml_init() != 0 || cu.nvml_handle(0, &device) != 0 ||
          cu.nvml_memory(device, &m) != 0)
        return "error nvml";
      return "ok " + std::to_string(m.free) + " " + std::to_string(m.total) + " " +
             std::to_string(m.used);
    }
    if (command == "launch" || command == "capture-launch") {
      int count = 0, us = 0;
      in >> count >> us;
      return launch(count, us, command == "launch" ? nullptr : stream);
    }
    if (command == "capture-begin" || command == "thread-mode") {
      std::string name;
      in >> name;
      CUstreamCaptureMode mode;
      if (!capture_mode(name, &mode)) return "error mode " + name;
      if (command == "thread-mode") {
        CUresult r = cu.exchange_mode(&mode);
        return r == CUDA_SUCCESS ? "ok" : error(r);
      }
      if (!stream) {
        if (CUresult r = cu.stream_create(&stream, 0); r != CUDA_SUCCESS) return error(r);
      }
      CUresult r = cu.begin_capture(stream, mode);
      return r == CUDA_SUCCESS ? "ok" : error(r);
    }
    if (command == "capture-end") {
      CUresult r = cu.end_capture(stream, &graph);
      if (r != CUDA_SUCCESS) return error(r);
      size_t nodes = 0;
      if (CUresult q = cu.graph_nodes(graph, nullptr, &nodes); q != CUDA_SUCCESS) return error(q);
      return "ok " + std::to_string(nodes);
    }
    if (command == "graph-launch") {
      CUgraphExec exec = nullptr;
      if (CUresult r = cu.instantiate(&exec, graph, 0); r != CUDA_SUCCESS) return error(r);
      CUresult r = cu.graph_launch(exec, stream);
      return r == CUDA_SUCCESS ? "ok" : error(r);
    }
    if (command == "exit") std::exit(0);  // no answer: the process's exit handlers run now
    if (command == "block") {
      const auto* b = control_block();
      if (!b) return "error no control block";
      return "block " + std::to_string(b->paused.load()) + " " +
             std::to_string(b->memory_residency.load());
    }
    return "error unknown command " + command;
  }
};

}  // namespace

int main() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!cuda) {
    std::printf("error dlopen %s\n", dlerror());
    return 1;
  }
  Client client;
  Driver& d = client.cu;
  bool ok = gpushare::clients::resolve_probe_driver(cuda, d) &&
            resolve(cuda, "cuMemcpyHtoD_v2", &d.htod) &&
            resolve(cuda, "cuMemcpyDtoH_v2", &d.dtoh) &&
            resolve(cuda, "cuMemGetInfo_v2", &d.mem_get_info) &&
            resolve(cuda, "cuDeviceTotalMem_v2", &d.total_mem) &&
            resolve(cuda, "cuStreamCreate", &d.stream_create) &&
            resolve(cuda, "cuStreamBeginCapture_v2", &d.begin_capture) &&
            resolve(cuda, "cuStreamEndCapture", &d.end_capture) &&
            resolve(cuda, "cuGraphGetNodes", &d.graph_nodes) &&
            resolve(cuda, "cuGraphInstantiateWithFlags", &d.instantiate) &&
            resolve(cuda, "cuGraphLaunch", &d.graph_launch) &&
            resolve(cuda, "cuThreadExchangeStreamCaptureMode", &d.exchange_mode);
  if (nvml) {
    resolve(nvml, "nvmlInit_v2", &d.nvml_init);
    resolve(nvml, "nvmlDeviceGetHandleByIndex_v2", &d.nvml_handle);
    resolve(nvml, "nvmlDeviceGetMemoryInfo", &d.nvml_memory);
  }
  if (!ok) {
    std::printf("error dlsym\n");
    return 1;
  }
  std::printf("ready %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::printf("%s\n", client.run(line).c_str());
    std::fflush(stdout);
  }
  return 0;
}
