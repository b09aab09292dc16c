// What the line-protocol test programs share (tests/daemon/daemon_probe.cpp,
// tests/memory/memory_client.cpp): the driver entry points they call, resolved from libcuda.so.1
// with dlsym the way programs do, and the context and module their "init" command sets up.
// Header-only: each program is one file, built with the CUDA headers only.
#pragma once

#include <dlfcn.h>

#include <string>

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1  // exact exported names (cuMemAlloc_v2, ...)
#endif
#include <cuda.h>

namespace gpushare::clients {

struct ProbeDriver {
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&cuMemFree_v2) mem_free = nullptr;
  decltype(&cuModuleLoadData) module_load_data = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
};

template <class Fn>
bool resolve(void* library, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  return *out != nullptr;
}

inline bool resolve_probe_driver(void* cuda, ProbeDriver& d) {
  return resolve(cuda, "cuInit", &d.init) && resolve(cuda, "cuDeviceGet", &d.device_get) &&
         resolve(cuda, "cuDevicePrimaryCtxRetain", &d.primary_ctx_retain) &&
         resolve(cuda, "cuCtxSetCurrent", &d.ctx_set_current) &&
         resolve(cuda, "cuMemAlloc_v2", &d.mem_alloc) &&
         resolve(cuda, "cuMemFree_v2", &d.mem_free) &&
         resolve(cuda, "cuModuleLoadData", &d.module_load_data) &&
         resolve(cuda, "cuModuleGetFunction", &d.module_get_function) &&
         resolve(cuda, "cuLaunchKernel", &d.launch_kernel);
}

// cuInit, device 0's primary context made current, the fake driver's module loaded: "" or the
// protocol's error line.
inline std::string init_context(const ProbeDriver& cu, CUmodule* module) {
  CUdevice device;
  CUcontext context;
  if (cu.init(0) != CUDA_SUCCESS) return "error cuInit";
  if (cu.device_get(&device, 0) != CUDA_SUCCESS ||
      cu.primary_ctx_retain(&context, device) != CUDA_SUCCESS ||
      cu.ctx_set_current(context) != CUDA_SUCCESS)
    return "error context";
  static const char image[] = "fake module";
  if (cu.module_load_data(module, image) != CUDA_SUCCESS) return "error module";
  return "";
}

}  // namespace gpushare::clients
