// The fake driver's per-process objects (contexts, streams, events, modules, graphs, pools) and
// the checks every entry point shares. Handles are pointers to these objects; each starts with a
// tag, so a foreign or destroyed handle gives CUDA_ERROR_INVALID_HANDLE rather than a crash.
// In async mode (kernel_queue.h) streams and events are positions in their device's kernel queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// The driver API is what the fake exports: its declarations get default visibility, everything
// else in the library is hidden (CXX_VISIBILITY_PRESET) and the version script keeps it local.
#pragma GCC visibility push(default)
#include "cuda_api.h"
#pragma GCC visibility pop

#include "kernel_queue.h"

namespace gpushare::fake {

enum class Tag : uint32_t {
  dead = 0,
  context = 0x7a6b0001,
  stream,
  event,
  module,
  function,
  graph,
  graph_node,
  graph_exec,
  pool,
  physical_memory,
};

template <Tag T>
struct Tagged {
  static constexpr Tag kTag = T;
  Tag tag = T;
};

// Devices in objects are physical indices; CUdevice values at the API are the process's ordinals
// (CUDA_VISIBLE_DEVICES), translated where they cross it.
struct Context : Tagged<Tag::context> {
  int device = 0;
  bool primary = false;
  int primary_refs = 0;  // cuDevicePrimaryCtxRetain minus Release
};

struct Graph;

struct Stream : Tagged<Tag::stream> {
  Context* context = nullptr;
  // Stream capture (capture_api.cpp), under its lock: the status, the mode and thread it began
  // with, and the graph its launches become nodes of.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  long capture_thread = 0;
  Graph* capture_graph = nullptr;
  // Async mode: the queue position of its last kernel (0: none), so that a stream whose kernels
  // are done reads complete while other streams of the device still have work queued.
  std::atomic<uint64_t> last_kernel{0};
};

struct Event : Tagged<Tag::event> {
  uint64_t recorded_ns = 0;  // 0: never recorded
  // When the work before it counts as done, at the earliest. In sync mode kernels are done when
  // they return, so this is the recording time, unless GPUSHARE_FAKE_EVENT_DELAY_US models a
  // queue that drains later (the delay applies in async mode too, on top of `mark`).
  uint64_t complete_ns = 0;
  // Async mode: the recording stream's position, reached when the kernels before it are done;
  // its time is the event's timestamp. Shared with the queue, so destroying or re-recording the
  // event while it is pending is safe. nullptr in sync mode.
  std::shared_ptr<QueueMark> mark;
};

// A kernel: `spin_<microseconds>` holds the engine that long, any other name takes no time.
struct Function : Tagged<Tag::function> {
  std::string name;
  uint64_t duration_ns = 0;
};

struct Module : Tagged<Tag::module> {
  std::mutex lock;
  std::vector<std::unique_ptr<Function>> functions;  // one per name, handed out again on lookup
};

struct GraphNode : Tagged<Tag::graph_node> {
  const Function* kernel = nullptr;
};

struct Graph : Tagged<Tag::graph> {
  std::vector<std::unique_ptr<GraphNode>> nodes;
};

struct GraphExec : Tagged<Tag::graph_exec> {
  std::vector<const Function*> kernels;  // in the order their nodes were added
};

struct MemoryPool : Tagged<Tag::pool> {
  int device = 0;
};

// Physical memory made by cuMemCreate: a memfd, so that cuMemMap can alias it at any address.
struct PhysicalMemory : Tagged<Tag::physical_memory> {
  int device = 0;
  uint64_t bytes = 0;
  int memfd = -1;
  int owner_pid = 0;
};

// The object behind a handle, or nullptr when the handle is null or of another kind.
template <class T>
T* as(const void* handle) {
  if (handle == nullptr) return nullptr;
  auto* object = static_cast<T*>(const_cast<void*>(handle));
  return object->tag == T::kTag ? object : nullptr;
}

// Deletes an object so that its handle no longer validates (the volatile store is not elided).
template <class T>
void destroy(T* object) {
  *const_cast<volatile Tag*>(&object->tag) = Tag::dead;
  delete object;
}

// What every entry point answers before its own work, as in the real driver:
// CUDA_ERROR_NOT_INITIALIZED until cuInit succeeded, CUDA_ERROR_DEINITIALIZED once the driver
// shut down as its process exits (only with GPUSHARE_FAKE_EXIT_HOLD_MS: context_api.cpp),
// else CUDA_SUCCESS.
CUresult driver_state();
inline bool initialized() {
  return driver_state() == CUDA_SUCCESS;
}
void mark_initialized();
#define REQUIRE_INIT() \
  if (CUresult state_ = driver_state(); state_ != CUDA_SUCCESS) return state_

// The calling thread's current context (nullptr when none) and its device.
Context* current_context();
void set_current_context(Context* context);
Context* primary_context(int device);  // never null for a valid device

// The device a call runs on: the current context's (CUDA_ERROR_INVALID_CONTEXT when none).
CUresult current_device(int* device);
// The NULL, legacy and per-thread default streams: the context's own, not a created stream.
inline bool is_default_stream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}
// The device of a stream: its context's, or the current context's for the NULL, legacy and
// per-thread default streams.
CUresult stream_device(CUstream stream, int* device);
// Async mode: the queue position that stands for a stream's work so far: a created stream's last
// kernel; the whole device queue for the NULL, legacy and per-thread default streams (the
// simplification: they wait for, and are waited for by, every stream of the process).
uint64_t stream_tail(CUstream stream, int device);
bool valid_device(CUdevice device);
// The physical device of an ordinal (-1: not one of this process's), and back (-1: not visible).
int physical_device(CUdevice ordinal);
CUdevice ordinal_of(int physical);

uint64_t now_ns();

// Stream capture (capture_api.cpp). What a call must respect while the process captures:
enum class CaptureConflict {
  // "Potentially unsafe" calls (allocations, memory advice, event queries): refused by the mode
  // rules of cuThreadExchangeStreamCaptureMode.
  unsafe_call,
  // Work on the NULL (legacy) stream, which would join every capturing stream of its device.
  legacy_stream,
  // cuCtxSynchronize: conflicts with every capture of its device, in any mode, from any thread.
  context_sync,
};
// CUDA_SUCCESS when a call of this kind on `device` may go ahead beside the process's captures;
// otherwise the error it returns, and the captures it conflicts with are invalidated.
CUresult capture_conflict(CaptureConflict kind, int device);
// A launch into a capturing stream: its kernels become nodes of the capture's graph and run
// nothing. Returns false when `stream` does not capture; else sets `result`.
bool capture_kernels(CUstream stream, const std::vector<const Function*>& kernels,
                     CUresult* result);
// A destroyed stream's capture ends with it.
void forget_capture(Stream* stream);
}  // namespace gpushare::fake
