// The driver entry points the test clients use, and the ways real programs obtain them:
// cudart-style through cuGetProcAddress, by dlsym, or by linking with -lcuda (client_linked.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "cuda_api.h"

namespace gpushare::clients {

// X(field, base name asked of cuGetProcAddress, exported symbol, per-thread-stream symbol)
// clang-format off
#define CLIENT_DRIVER_API(X)                                                                   \
  X(init, cuInit, cuInit, cuInit)                                                              \
  X(device_get, cuDeviceGet, cuDeviceGet, cuDeviceGet)                                         \
  X(device_get_count, cuDeviceGetCount, cuDeviceGetCount, cuDeviceGetCount)                    \
  X(device_total_mem, cuDeviceTotalMem, cuDeviceTotalMem_v2, cuDeviceTotalMem_v2)              \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,                    \
    cuDevicePrimaryCtxRetain)                                                                  \
  X(ctx_set_current, cuCtxSetCurrent, cuCtxSetCurrent, cuCtxSetCurrent)                        \
  X(ctx_synchronize, cuCtxSynchronize, cuCtxSynchronize, cuCtxSynchronize)                     \
  X(module_load_data, cuModuleLoadData, cuModuleLoadData, cuModuleLoadData)                    \
  X(module_get_function, cuModuleGetFunction, cuModuleGetFunction, cuModuleGetFunction)        \
  X(stream_create, cuStreamCreate, cuStreamCreate, cuStreamCreate)                             \
  X(stream_synchronize, cuStreamSynchronize, cuStreamSynchronize, cuStreamSynchronize_ptsz)    \
  X(launch_kernel, cuLaunchKernel, cuLaunchKernel, cuLaunchKernel_ptsz)                        \
  X(launch_kernel_ex, cuLaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx_ptsz)               \
  X(launch_cooperative, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel,                  \
    cuLaunchCooperativeKernel_ptsz)                                                            \
  X(launch_cooperative_multi, cuLaunchCooperativeKernelMultiDevice,                            \
    cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice)                \
  X(graph_create, cuGraphCreate, cuGraphCreate, cuGraphCreate)                                 \
  X(graph_add_kernel_node, cuGraphAddKernelNode, cuGraphAddKernelNode_v2,                      \
    cuGraphAddKernelNode_v2)                                                                   \
  X(graph_instantiate, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags,               \
    cuGraphInstantiateWithFlags)                                                               \
  X(graph_launch, cuGraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz)                            \
  X(graph_exec_destroy, cuGraphExecDestroy, cuGraphExecDestroy, cuGraphExecDestroy)           \
  X(graph_destroy, cuGraphDestroy, cuGraphDestroy, cuGraphDestroy)                             \
  X(mem_alloc, cuMemAlloc, cuMemAlloc_v2, cuMemAlloc_v2)                                       \
  X(mem_alloc_pitch, cuMemAllocPitch, cuMemAllocPitch_v2, cuMemAllocPitch_v2)                  \
  X(mem_alloc_managed, cuMemAllocManaged, cuMemAllocManaged, cuMemAllocManaged)                \
  X(mem_alloc_async, cuMemAllocAsync, cuMemAllocAsync, cuMemAllocAsync_ptsz)                   \
  X(mem_alloc_from_pool_async, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync,               \
    cuMemAllocFromPoolAsync_ptsz)                                                              \
  X(device_get_default_mem_pool, cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool,         \
    cuDeviceGetDefaultMemPool)                                                                 \
  X(mem_free, cuMemFree, cuMemFree_v2, cuMemFree_v2)                                           \
  X(mem_free_async, cuMemFreeAsync, cuMemFreeAsync, cuMemFreeAsync_ptsz)                       \
  X(mem_get_info, cuMemGetInfo, cuMemGetInfo_v2, cuMemGetInfo_v2)                              \
  X(mem_get_allocation_granularity, cuMemGetAllocationGranularity,                             \
    cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)                              \
  X(mem_create, cuMemCreate, cuMemCreate, cuMemCreate)                                         \
  X(mem_release, cuMemRelease, cuMemRelease, cuMemRelease)                                     \
  X(mem_address_reserve, cuMemAddressReserve, cuMemAddressReserve, cuMemAddressReserve)       \
  X(mem_address_free, cuMemAddressFree, cuMemAddressFree, cuMemAddressFree)                   \
  X(mem_map, cuMemMap, cuMemMap, cuMemMap)                                                     \
  X(mem_unmap, cuMemUnmap, cuMemUnmap, cuMemUnmap)                                             \
  X(mem_set_access, cuMemSetAccess, cuMemSetAccess, cuMemSetAccess)                            \
  X(memcpy_htod, cuMemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds)                          \
  X(memcpy_dtoh, cuMemcpyDtoH, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds)
// clang-format on

struct DriverApi {
#define CLIENT_FIELD(field, base, exact, per_thread) decltype(&::exact) field = nullptr;
  CLIENT_DRIVER_API(CLIENT_FIELD)
#undef CLIENT_FIELD
};

// Calls the given cuGetProcAddress-shaped lookup for every entry point's base name.
// `lookup` returns CUDA_SUCCESS and sets *pfn, or an error. Returns "" or the first failure.
using ProcLookup = CUresult (*)(void* context, const char* base_name, void** pfn);
std::string resolve_by_proc_address(DriverApi& api, ProcLookup lookup, void* context);

// Looks every entry point up by its exported name (the per-thread variant when `per_thread`).
// `lookup` returns nullptr when absent. Returns "" or the name of the first missing symbol.
using SymbolLookup = void* (*)(void* context, const char* name);
std::string resolve_by_symbol(DriverApi& api, SymbolLookup lookup, void* context, bool per_thread);

// The cudart way: dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2"), ask it
// for "cuGetProcAddress" itself, then resolve everything through the pointer it returned. With a
// cuda_version below 12000 (a CUDA 11 cudart) the same with the old cuGetProcAddress throughout.
struct CudartResolution {
  std::string error;              // "" on success
  int proc_address_calls_v2 = 0;  // successful calls of a cuGetProcAddress_v2-shaped pointer
  int proc_address_calls_v1 = 0;  // ... of a cuGetProcAddress-shaped one (cudaVersion < 12000)
  int failed_lookups = 0;         // lookups of a name the driver does not have (answered NOT_FOUND)
};
CudartResolution resolve_cudart_style(DriverApi& api, int cuda_version, bool per_thread);

// Where a pointer lives: {"symbol": nearest exported name, "object": file name of its library}.
std::string symbol_of(const void* p);
std::string object_of(const void* p);
}  // namespace gpushare::clients
