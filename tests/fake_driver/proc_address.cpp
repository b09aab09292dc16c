// Fake driver: cuGetProcAddress / cuGetProcAddress_v2, answering like the real driver.
//
// `symbol` is a base name ("cuMemAlloc", "cuLaunchKernel", "cuGetProcAddress"). Of the entry
// points of that name, the newest whose `since` does not exceed the caller's cudaVersion wins
// (cuMemAlloc -> cuMemAlloc_v2 from 3020, cuGetProcAddress -> cuGetProcAddress_v2 from 12000);
// with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM its per-thread variant (_ptsz / _ptds) when
// it has one. The library is linked with -Bsymbolic, so these addresses are the fake's own
// functions even when a preloaded shim exports the same names.
#include <cstring>

#include "driver_objects.h"

namespace {

struct ProcSymbol {
  const char* name;  // base name, as callers ask for it
  int since;         // first CUDA version (1000 * major + 10 * minor) that gets this entry point
  void* entry;
  void* per_thread;  // the per-thread-default-stream variant, or nullptr
};

template <class F>
void* fn(F* f) {
  return reinterpret_cast<void*>(f);
}

#define SYMBOL(base, since, entry) \
  { #base, since, fn(&entry), nullptr }
#define SYMBOL_PT(base, since, entry, per_thread) \
  { #base, since, fn(&entry), fn(&per_thread) }

// clang-format off
const ProcSymbol kSymbols[] = {
  SYMBOL(cuInit, 2000, cuInit),
  SYMBOL(cuDriverGetVersion, 2020, cuDriverGetVersion),
  SYMBOL(cuGetProcAddress, 11030, cuGetProcAddress),
  SYMBOL(cuGetProcAddress, 12000, cuGetProcAddress_v2),
  SYMBOL(cuGetErrorName, 6000, cuGetErrorName),
  SYMBOL(cuGetErrorString, 6000, cuGetErrorString),
  SYMBOL(cuDeviceGet, 2000, cuDeviceGet),
  SYMBOL(cuDeviceGetCount, 2000, cuDeviceGetCount),
  SYMBOL(cuDeviceGetName, 2000, cuDeviceGetName),
  SYMBOL(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
  SYMBOL(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
  SYMBOL(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
  SYMBOL(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
  SYMBOL(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
  SYMBOL(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
  SYMBOL(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
  SYMBOL(cuCtxCreate, 3020, cuCtxCreate_v2),
  SYMBOL(cuCtxDestroy, 4000, cuCtxDestroy_v2),
  SYMBOL(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
  SYMBOL(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
  SYMBOL(cuCtxGetDevice, 2000, cuCtxGetDevice),
  SYMBOL(cuCtxSynchronize, 2000, cuCtxSynchronize),
  SYMBOL(cuStreamCreate, 2000, cuStreamCreate),
  SYMBOL(cuStreamDestroy, 2000, cuStreamDestroy),
  SYMBOL(cuStreamDestroy, 4000, cuStreamDestroy_v2),
  SYMBOL_PT(cuStreamSynchronize, 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
  SYMBOL_PT(cuStreamQuery, 2000, cuStreamQuery, cuStreamQuery_ptsz),
  SYMBOL_PT(cuStreamBeginCapture, 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
  SYMBOL_PT(cuStreamBeginCapture, 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
  SYMBOL_PT(cuStreamBeginCaptureToGraph, 12030, cuStreamBeginCaptureToGraph,
            cuStreamBeginCaptureToGraph_ptsz),
  SYMBOL_PT(cuStreamEndCapture, 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
  SYMBOL_PT(cuStreamIsCapturing, 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
  SYMBOL(cuThreadExchangeStreamCaptureMode, 10010, cuThreadExchangeStreamCaptureMode),
  SYMBOL(cuEventCreate, 2000, cuEventCreate),
  SYMBOL_PT(cuEventRecord, 2000, cuEventRecord, cuEventRecord_ptsz),
  SYMBOL(cuEventQuery, 2000, cuEventQuery),
  SYMBOL(cuEventSynchronize, 2000, cuEventSynchronize),
  SYMBOL(cuEventElapsedTime, 2000, cuEventElapsedTime),
  SYMBOL(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
  SYMBOL(cuEventDestroy, 2000, cuEventDestroy),
  SYMBOL(cuEventDestroy, 4000, cuEventDestroy_v2),
  SYMBOL(cuModuleLoadData, 2000, cuModuleLoadData),
  SYMBOL(cuModuleUnload, 2000, cuModuleUnload),
  SYMBOL(cuModuleGetFunction, 2000, cuModuleGetFunction),
  SYMBOL_PT(cuLaunchKernel, 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
  SYMBOL_PT(cuLaunchKernelEx, 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
  SYMBOL_PT(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel,
            cuLaunchCooperativeKernel_ptsz),
  SYMBOL(cuLaunchCooperativeKernelMultiDevice, 9000, cuLaunchCooperativeKernelMultiDevice),
  SYMBOL(cuGraphCreate, 10000, cuGraphCreate),
  SYMBOL(cuGraphAddKernelNode, 10000, cuGraphAddKernelNode),
  SYMBOL(cuGraphAddKernelNode, 12000, cuGraphAddKernelNode_v2),
  SYMBOL(cuGraphGetNodes, 10000, cuGraphGetNodes),
  SYMBOL(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
  SYMBOL(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags),
  SYMBOL_PT(cuGraphLaunch, 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
  SYMBOL(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
  SYMBOL(cuGraphDestroy, 10000, cuGraphDestroy),
  SYMBOL(cuMemAlloc, 3020, cuMemAlloc_v2),
  SYMBOL(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
  SYMBOL(cuMemAllocManaged, 6000, cuMemAllocManaged),
  SYMBOL_PT(cuMemAllocAsync, 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
  SYMBOL_PT(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
  SYMBOL(cuMemFree, 3020, cuMemFree_v2),
  SYMBOL_PT(cuMemFreeAsync, 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
  SYMBOL(cuMemGetInfo, 3020, cuMemGetInfo_v2),
  SYMBOL_PT(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
  SYMBOL_PT(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
  SYMBOL_PT(cuMemsetD8, 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
  SYMBOL(cuMemAdvise, 8000, cuMemAdvise),
  SYMBOL(cuMemAdvise, 12020, cuMemAdvise_v2),
  SYMBOL_PT(cuMemPrefetchAsync, 8000, cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz),
  SYMBOL_PT(cuMemPrefetchAsync, 12020, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz),
  SYMBOL(cuMemCreate, 10020, cuMemCreate),
  SYMBOL(cuMemRelease, 10020, cuMemRelease),
  SYMBOL(cuMemAddressReserve, 10020, cuMemAddressReserve),
  SYMBOL(cuMemAddressFree, 10020, cuMemAddressFree),
  SYMBOL(cuMemMap, 10020, cuMemMap),
  SYMBOL(cuMemUnmap, 10020, cuMemUnmap),
  SYMBOL(cuMemSetAccess, 10020, cuMemSetAccess),
  SYMBOL(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
};
// clang-format on

CUresult lookup(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~kKnownFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  bool known = false;
  const ProcSymbol* best = nullptr;
  for (const ProcSymbol& s : kSymbols) {
    if (std::strcmp(s.name, symbol) != 0) continue;
    known = true;
    if (s.since <= cuda_version && (best == nullptr || s.since > best->since)) best = &s;
  }
  if (best == nullptr) {
    if (status != nullptr && known) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = per_thread && best->per_thread != nullptr ? best->per_thread : best->entry;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
}  // namespace

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  return lookup(symbol, pfn, cuda_version, flags, nullptr);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return lookup(symbol, pfn, cuda_version, flags, status);
}
}  // extern "C"
