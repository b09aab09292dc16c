// What each family of hooked symbol does around the real call (see hook_table.h). The launch
// family is the hot path: read it whole, it fits on one screen.
#pragma once

#include <cstring>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "accounting.h"
#include "completions.h"
#include "gate.h"
#include "hooks.h"
#include "in_flight.h"
#include "lifecycle.h"
#include "memory_admission.h"
#include "memory_swap.h"
#include "memory_view.h"
#include "stream_capture.h"

namespace gpushare::shim {

// Returned when the real library cannot be found: the symbol exists only because we export it.
inline constexpr CUresult kNoDriver = CUDA_ERROR_STUB_LIBRARY;

// The stream a launch goes to: cuLaunchKernel and cuLaunchCooperativeKernel take it ninth,
// cuLaunchKernelEx in its config.
template <class First, class... Rest>
inline CUstream launch_stream(First first, Rest... rest) {
  if constexpr (std::is_same_v<First, const CUlaunchConfig*>) {
    return first ? first->hStream : nullptr;
  } else {
    return std::get<7>(std::tuple<Rest...>(rest...));
  }
}

template <Hook H>
inline constexpr bool kPerThreadStream = std::string_view(info(H).name).ends_with("_ptsz");

template <Hook H, class... A>
inline CUresult launch(A... args) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  const GatePass pass = pass_gate(g_shim, 1, {launch_stream(args...), kPerThreadStream<H>});
  const uint32_t bound = in_flight_bound(pass.block);
  if (bound) [[unlikely]]
    in_flight_before_launch(g_shim, bound, launch_stream(args...), kPerThreadStream<H>);
  CUresult result = fn(args...);
  if (bound) [[unlikely]]
    in_flight_after_launch(g_shim, bound, launch_stream(args...), kPerThreadStream<H>,
                           result == CUDA_SUCCESS);
  if (completion_mark_due(g_shim, pass.ticket)) [[unlikely]]
    completion_mark(g_shim, pass.ticket, launch_stream(args...), kPerThreadStream<H>,
                    result == CUDA_SUCCESS);
  count_call(H, result == CUDA_SUCCESS);
  return result;
}

template <Hook H>
inline CUresult launch_multi(CUDA_LAUNCH_PARAMS* list, unsigned int devices, unsigned int flags) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  pass_gate(g_shim, devices);
  CUresult result = fn(list, devices, flags);
  count_call(H, result == CUDA_SUCCESS);
  if (result == CUDA_SUCCESS) g_multi_device_kernels.fetch_add(devices, std::memory_order_relaxed);
  return result;
}

template <Hook H>
inline CUresult graph_launch(CUgraphExec graph, CUstream stream) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  // A graph is one gate ticket: the shim cannot see how many kernels it holds without walking it.
  const GatePass pass = pass_gate(g_shim, 1, {stream, kPerThreadStream<H>});
  pass.block->graph_launches.fetch_add(1, std::memory_order_relaxed);
  const uint32_t bound = in_flight_bound(pass.block);
  if (bound) [[unlikely]]
    in_flight_before_launch(g_shim, bound, stream, kPerThreadStream<H>);
  CUresult result = fn(graph, stream);
  if (bound) [[unlikely]]
    in_flight_after_launch(g_shim, bound, stream, kPerThreadStream<H>, result == CUDA_SUCCESS);
  if (completion_mark_due(g_shim, pass.ticket)) [[unlikely]]
    completion_mark(g_shim, pass.ticket, stream, kPerThreadStream<H>, result == CUDA_SUCCESS);
  count_call(H, result == CUDA_SUCCESS);
  return result;
}

template <Hook H>
inline CUresult init(unsigned int flags) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  daemon_link_before_init();  // CUDA_MPS_* must be in the environment before the driver reads it
  CUresult result = fn(flags);
  if (result == CUDA_SUCCESS) result = on_first_init();
  count_call(H, result == CUDA_SUCCESS);
  return result;
}

// A stream capture's start and end, counted so that the swap thread never moves memory (which
// synchronises the context) while a capture is in progress (stream_capture.h).
template <Hook H, class... A>
inline CUresult capture_begin(CUstream stream, A... rest) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  CaptureExclusion& captures = capture_exclusion();
  captures.before_begin();
  CUresult result = fn(stream, rest...);
  captures.after_begin(capture_key(stream, kPerThreadStream<H>), result == CUDA_SUCCESS);
  count_call(H, result == CUDA_SUCCESS);
  return result;
}

template <Hook H>
inline CUresult capture_end(CUstream stream, CUgraph* graph) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  CUresult result = fn(stream, graph);
  const DriverCalls& d = driver_calls();
  bool over;
  {
    RelaxedCapture relaxed(d);
    over = capture_over(d, stream, kPerThreadStream<H>);
  }
  capture_exclusion().after_end(capture_key(stream, kPerThreadStream<H>), over);
  count_call(H, result == CUDA_SUCCESS);
  return result;
}

// --- memory -------------------------------------------------------------------------------

int current_device();  // the calling thread's context device, 0 when it has none

// What an allocation call created, one overload per allocation signature of the table.
inline Allocation describe_allocation(CUdeviceptr* p, size_t bytes) {
  return {*p, bytes, current_device(), AllocKind::linear};
}
inline Allocation describe_allocation(CUdeviceptr* p, size_t* pitch, size_t, size_t height,
                                      unsigned int) {
  return {*p, *pitch * height, current_device(), AllocKind::pitch};  // as the driver reserves it
}
inline Allocation describe_allocation(CUdeviceptr* p, size_t bytes, unsigned int) {
  return {*p, bytes, current_device(), AllocKind::managed};
}
inline Allocation describe_allocation(CUdeviceptr* p, size_t bytes, CUstream) {
  return {*p, bytes, current_device(), AllocKind::async};
}
inline Allocation describe_allocation(CUdeviceptr* p, size_t bytes, CUmemoryPool, CUstream) {
  return {*p, bytes, current_device(), AllocKind::pool};
}
inline Allocation describe_allocation(CUmemGenericAllocationHandle* h, size_t bytes,
                                      const CUmemAllocationProp* prop, unsigned long long) {
  bool on_device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  return {*h, bytes, on_device ? prop->location.id : current_device(), AllocKind::vmm};
}

// What an allocation call asks for, before it is made: (bytes, device ordinal, kind).
struct AllocRequest {
  uint64_t bytes;
  int device;
  AllocKind kind;
};
inline AllocRequest describe_request(CUdeviceptr*, size_t bytes) {
  return {bytes, current_device(), AllocKind::linear};
}
inline AllocRequest describe_request(CUdeviceptr*, size_t*, size_t width, size_t height,
                                     unsigned int) {
  return {uint64_t{width} * height, current_device(), AllocKind::pitch};  // committed as made
}
inline AllocRequest describe_request(CUdeviceptr*, size_t bytes, unsigned int) {
  return {bytes, current_device(), AllocKind::managed};
}
inline AllocRequest describe_request(CUdeviceptr*, size_t bytes, CUstream) {
  return {bytes, current_device(), AllocKind::async};
}
inline AllocRequest describe_request(CUdeviceptr*, size_t bytes, CUmemoryPool, CUstream) {
  return {bytes, current_device(), AllocKind::pool};
}
inline AllocRequest describe_request(CUmemGenericAllocationHandle*, size_t bytes,
                                     const CUmemAllocationProp* prop, unsigned long long) {
  bool on_device = prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  return {bytes, on_device ? prop->location.id : current_device(), AllocKind::vmm};
}

// Declared to the daemon BEFORE it is made (docs/memory.md): refused means out of memory. An
// opportunistic job's plain allocation is made as managed memory, which the daemon can have moved
// to host when production needs the room.
template <Hook H, class... A>
inline CUresult alloc(A... args) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  AllocRequest request = describe_request(args...);
  bool swappable = request.kind == AllocKind::managed;
  if constexpr (H == Hook::cuMemAlloc_v2) swappable = allocates_swappable();
  Reservation reservation = reserve_memory(request.bytes, request.device, request.kind, swappable);
  if (!reservation.admitted) {
    count_call(H, false);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult result;
  if constexpr (H == Hook::cuMemAlloc_v2)
    result = swappable ? alloc_swappable(args...) : fn(args...);
  else
    result = fn(args...);
  count_call(H, result == CUDA_SUCCESS);
  if (result != CUDA_SUCCESS) {
    cancel_memory(reservation);
    return result;
  }
  Allocation a = describe_allocation(args...);
  if (swappable) a.kind = AllocKind::managed;
  record_alloc(a);
  commit_memory(reservation, a);
  return result;
}

template <Hook H, class Handle, class... Rest>
inline CUresult dealloc(Handle handle, Rest... rest) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  // Un-account before the real free: once it returns, another thread may be handed the same
  // address, and its record must not be the one this free removes. Freeing 0 is a successful
  // no-op in CUDA, not an unknown free.
  // Managed memory leaves the swap thread's books first (waiting for a move in progress).
  Allocation freed;
  bool known = handle != 0 && record_free(static_cast<uint64_t>(handle), &freed);
  bool swappable = known && freed.kind == AllocKind::managed && untrack_swappable(freed.handle);
  CUresult result = fn(handle, rest...);
  count_call(H, result == CUDA_SUCCESS);
  if (known && result != CUDA_SUCCESS) restore_allocation(freed);
  if (swappable && result != CUDA_SUCCESS)
    retrack_swappable(freed.handle, freed.bytes, freed.device);
  if (known && result == CUDA_SUCCESS) daemon_link_declare_free(freed.handle, freed.device);
  if (!known && handle != 0 && result == CUDA_SUCCESS) count_unknown_free();
  return result;
}

// The job's view of memory (shim/memory_view.h): the driver answers, then the view replaces the
// numbers of a successful call.
template <Hook H, class... A>
inline CUresult mem_info(A... args) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  CUresult result = fn(args...);
  count_call(H, result == CUDA_SUCCESS);
  if (result != CUDA_SUCCESS) return result;
  if constexpr (H == Hook::cuMemGetInfo_v2)
    view_mem_info(args...);
  else
    view_total_mem(args...);
  return result;
}

template <Hook H, class... A>
inline nvmlReturn_t nvml_mem_info(A... args) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNvmlErrorUninitialized;
  nvmlReturn_t result = fn(args...);
  count_call(H, result == kNvmlSuccess);
  if (result == kNvmlSuccess) view_nvml_memory(args...);
  return result;
}

// --- cuGetProcAddress ------------------------------------------------------------------------

// Replaces *pfn by our wrapper when it is the real entry point of a hooked symbol (compared by
// address, so the _v2 / _ptsz variant the driver chose is kept).
void substitute_proc_address(const char* symbol, void** pfn);

template <Hook H, class... A>
inline CUresult proc_address(const char* symbol, void** pfn, A... rest) {
  auto fn = real<H>();
  if (!fn) [[unlikely]] return kNoDriver;
  CUresult result = fn(symbol, pfn, rest...);
  count_call(H, result == CUDA_SUCCESS);
  if (result == CUDA_SUCCESS && pfn && *pfn) substitute_proc_address(symbol, pfn);
  return result;
}

}  // namespace gpushare::shim
