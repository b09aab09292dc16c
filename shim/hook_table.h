// THE table of hooked symbols: the single source of truth (DESIGN.md §1).
//
// One line per symbol: X(family, library, name, return type, (parameters), (arguments)).
// From it come the Hook enum, the name table, the real-pointer table, the exported wrappers
// (shim/wrappers.cpp) and the family each wrapper dispatches to (shim/families.h). Adding a hooked
// symbol is one line here plus, for a new family, one function template.
//
// Families:
//   init          cuInit: registers with the daemon on the first call
//   launch        a kernel launch: counted, gated
//   launch_multi  a launch of one kernel on several devices
//   graph_launch  a graph launch: counted, gated
//   capture_begin/capture_end  a stream capture's start and end: the swap thread's moves wait for
//                 captures in progress (stream_capture.h)
//   alloc/dealloc device memory: accounted (bytes live and peak per device)
//   mem_info      the job's view of device memory
//   proc_address  cuGetProcAddress: hands back our wrappers for hooked symbols
//   nvml_mem_info NVML's memory info, so nvidia-smi inside a job agrees
//
// This header has no includes on purpose: it is also run through the preprocessor alone.
#pragma once

// clang-format off
#define GPUSHARE_CUDA_HOOKS(X)                                                                     \
  X(init, cuda, cuInit, CUresult, (unsigned int flags), (flags))                                   \
  X(launch, cuda, cuLaunchKernel, CUresult,                                                        \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params, void** extra),\
    (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra))                                          \
  X(launch, cuda, cuLaunchKernel_ptsz, CUresult,                                                   \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params, void** extra),\
    (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra))                                          \
  X(launch, cuda, cuLaunchKernelEx, CUresult,                                                      \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra),                     \
    (config, f, params, extra))                                                                    \
  X(launch, cuda, cuLaunchKernelEx_ptsz, CUresult,                                                 \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra),                     \
    (config, f, params, extra))                                                                    \
  X(launch, cuda, cuLaunchCooperativeKernel, CUresult,                                             \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params),             \
    (f, gx, gy, gz, bx, by, bz, shmem, s, params))                                                 \
  X(launch, cuda, cuLaunchCooperativeKernel_ptsz, CUresult,                                        \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,             \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void** params),             \
    (f, gx, gy, gz, bx, by, bz, shmem, s, params))                                                 \
  X(launch_multi, cuda, cuLaunchCooperativeKernelMultiDevice, CUresult,                            \
    (CUDA_LAUNCH_PARAMS* list, unsigned int devices, unsigned int flags), (list, devices, flags))  \
  X(graph_launch, cuda, cuGraphLaunch, CUresult, (CUgraphExec g, CUstream s), (g, s))              \
  X(graph_launch, cuda, cuGraphLaunch_ptsz, CUresult, (CUgraphExec g, CUstream s), (g, s))         \
  X(capture_begin, cuda, cuStreamBeginCapture, CUresult, (CUstream s), (s))                       \
  X(capture_begin, cuda, cuStreamBeginCapture_ptsz, CUresult, (CUstream s), (s))                  \
  X(capture_begin, cuda, cuStreamBeginCapture_v2, CUresult, (CUstream s, CUstreamCaptureMode mode),\
    (s, mode))                                                                                     \
  X(capture_begin, cuda, cuStreamBeginCapture_v2_ptsz, CUresult,                                   \
    (CUstream s, CUstreamCaptureMode mode), (s, mode))                                             \
  X(capture_begin, cuda, cuStreamBeginCaptureToGraph, CUresult,                                    \
    (CUstream s, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,             \
     size_t count, CUstreamCaptureMode mode),                                                      \
    (s, graph, deps, edges, count, mode))                                                          \
  X(capture_begin, cuda, cuStreamBeginCaptureToGraph_ptsz, CUresult,                               \
    (CUstream s, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,             \
     size_t count, CUstreamCaptureMode mode),                                                      \
    (s, graph, deps, edges, count, mode))                                                          \
  X(capture_end, cuda, cuStreamEndCapture, CUresult, (CUstream s, CUgraph* graph), (s, graph))    \
  X(capture_end, cuda, cuStreamEndCapture_ptsz, CUresult, (CUstream s, CUgraph* graph),           \
    (s, graph))                                                                                    \
  X(alloc, cuda, cuMemAlloc_v2, CUresult, (CUdeviceptr* dptr, size_t bytes), (dptr, bytes))        \
  X(alloc, cuda, cuMemAllocPitch_v2, CUresult,                                                     \
    (CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int element_size),    \
    (dptr, pitch, width, height, element_size))                                                    \
  X(alloc, cuda, cuMemAllocManaged, CUresult,                                                      \
    (CUdeviceptr* dptr, size_t bytes, unsigned int flags), (dptr, bytes, flags))                   \
  X(alloc, cuda, cuMemAllocAsync, CUresult,                                                        \
    (CUdeviceptr* dptr, size_t bytes, CUstream s), (dptr, bytes, s))                               \
  X(alloc, cuda, cuMemAllocAsync_ptsz, CUresult,                                                   \
    (CUdeviceptr* dptr, size_t bytes, CUstream s), (dptr, bytes, s))                               \
  X(alloc, cuda, cuMemAllocFromPoolAsync, CUresult,                                                \
    (CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s), (dptr, bytes, pool, s))      \
  X(alloc, cuda, cuMemAllocFromPoolAsync_ptsz, CUresult,                                           \
    (CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream s), (dptr, bytes, pool, s))      \
  X(alloc, cuda, cuMemCreate, CUresult,                                                            \
    (CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,          \
     unsigned long long flags),                                                                    \
    (handle, bytes, prop, flags))                                                                  \
  X(dealloc, cuda, cuMemFree_v2, CUresult, (CUdeviceptr dptr), (dptr))                                \
  X(dealloc, cuda, cuMemFreeAsync, CUresult, (CUdeviceptr dptr, CUstream s), (dptr, s))               \
  X(dealloc, cuda, cuMemFreeAsync_ptsz, CUresult, (CUdeviceptr dptr, CUstream s), (dptr, s))          \
  X(dealloc, cuda, cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle), (handle))           \
  X(mem_info, cuda, cuMemGetInfo_v2, CUresult, (size_t* free_bytes, size_t* total_bytes),          \
    (free_bytes, total_bytes))                                                                     \
  X(mem_info, cuda, cuDeviceTotalMem_v2, CUresult, (size_t* bytes, CUdevice dev), (bytes, dev))    \
  X(proc_address, cuda, cuGetProcAddress, CUresult,                                                \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags),                          \
    (symbol, pfn, cuda_version, flags))                                                            \
  X(proc_address, cuda, cuGetProcAddress_v2, CUresult,                                             \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,                           \
     CUdriverProcAddressQueryResult* status),                                                      \
    (symbol, pfn, cuda_version, flags, status))

#define GPUSHARE_NVML_HOOKS(X)                                                                     \
  X(nvml_mem_info, nvml, nvmlDeviceGetMemoryInfo, nvmlReturn_t,                                    \
    (nvmlDevice_t device, nvmlMemory_t* memory), (device, memory))                                 \
  X(nvml_mem_info, nvml, nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t,                                 \
    (nvmlDevice_t device, nvmlMemory_v2_t* memory), (device, memory))

#define GPUSHARE_HOOKS(X) GPUSHARE_CUDA_HOOKS(X) GPUSHARE_NVML_HOOKS(X)
// clang-format on
