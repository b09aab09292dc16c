// Fake driver: stream capture, with the rules a real driver enforces beside it.
//
// cuStreamBeginCapture(_v2, _ptsz, ToGraph) starts capturing a created stream (the NULL, legacy
// and per-thread default streams are refused: the fake's simplification); every launch into it
// then becomes a kernel node of the capture's graph and runs nothing; cuStreamEndCapture hands the
// graph over (instantiate and launch it as any graph). A capture is invalidated by a conflicting
// call (capture_conflict): its launches then fail with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and
// cuStreamEndCapture returns that error and no graph.
//
// The conflicts, as the CUDA documentation and measurements of the real driver describe them:
// - cuCtxSynchronize, from any thread in any mode, invalidates every capture on its device;
// - work on the NULL stream joins every capturing stream (all of the fake's streams are blocking);
// - a "potentially unsafe" call (an allocation, memory advice, an event query) is refused, and
//   the capture in the way invalidated, when the calling thread's mode (global by default,
//   cuThreadExchangeStreamCaptureMode) forbids it: in global mode while the thread itself
//   captures in a non-relaxed mode or another thread captures in global mode; in thread-local
//   mode only while the thread itself captures in a non-relaxed mode; never in relaxed mode.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "driver_objects.h"

namespace gpushare::fake {
namespace {

std::mutex g_capture_lock;
std::vector<Stream*> g_capturing;        // streams whose capture has begun and not ended
std::atomic<size_t> g_capture_count{0};  // g_capturing.size(), read without the lock
thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

long this_thread() {
  return syscall(SYS_gettid);
}

// Under the lock: whether a call of `kind` from this thread conflicts with `s`'s capture.
bool conflicts(CaptureConflict kind, const Stream& s, int device) {
  if (s.capture != CU_STREAM_CAPTURE_STATUS_ACTIVE || s.context->device != device) return false;
  if (kind != CaptureConflict::unsafe_call) return true;
  const bool own = s.capture_thread == this_thread();
  const bool strict = s.capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
  switch (t_mode) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
      return own ? strict : s.capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
      return own && strict;
    default:
      return false;
  }
}

CUresult begin_capture(CUstream stream, CUstreamCaptureMode mode, CUgraph into) {
  REQUIRE_INIT();
  if (is_default_stream(stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  Graph* graph = nullptr;
  if (into != nullptr && (graph = as<Graph>(into)) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(g_capture_lock);
  if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  s->capture_mode = mode;
  s->capture_thread = this_thread();
  s->capture_graph = graph ? graph : new Graph;
  g_capturing.push_back(s);
  g_capture_count.store(g_capturing.size(), std::memory_order_release);
  return CUDA_SUCCESS;
}

// Under the lock.
void stop_capturing(Stream* s) {
  s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
  s->capture_graph = nullptr;
  g_capturing.erase(std::remove(g_capturing.begin(), g_capturing.end(), s), g_capturing.end());
  g_capture_count.store(g_capturing.size(), std::memory_order_release);
}

CUresult end_capture(CUstream stream, CUgraph* graph) {
  REQUIRE_INIT();
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (is_default_stream(stream)) return CUDA_ERROR_ILLEGAL_STATE;
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(g_capture_lock);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED && s->capture_thread != this_thread())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  Graph* captured = s->capture_graph;
  const bool invalidated = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  stop_capturing(s);
  if (invalidated) {
    destroy(captured);
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(captured);
  return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  REQUIRE_INIT();
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (is_default_stream(stream)) return *status = CU_STREAM_CAPTURE_STATUS_NONE, CUDA_SUCCESS;
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(g_capture_lock);
  *status = s->capture;
  return CUDA_SUCCESS;
}
}  // namespace

CUresult capture_conflict(CaptureConflict kind, int device) {
  if (g_capture_count.load(std::memory_order_acquire) == 0) return CUDA_SUCCESS;
  std::lock_guard lock(g_capture_lock);
  bool any = false;
  for (Stream* s : g_capturing) {
    if (!conflicts(kind, *s, device)) continue;
    s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    any = true;
  }
  if (!any) return CUDA_SUCCESS;
  return kind == CaptureConflict::legacy_stream ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
                                                : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

bool capture_kernels(CUstream stream, const std::vector<const Function*>& kernels,
                     CUresult* result) {
  if (g_capture_count.load(std::memory_order_acquire) == 0) return false;
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return false;
  std::lock_guard lock(g_capture_lock);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) return false;
  if (s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    *result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return true;
  }
  for (const Function* kernel : kernels) {
    auto node = std::make_unique<GraphNode>();
    node->kernel = kernel;
    s->capture_graph->nodes.push_back(std::move(node));
  }
  *result = CUDA_SUCCESS;
  return true;
}

void forget_capture(Stream* stream) {
  std::lock_guard lock(g_capture_lock);
  if (stream->capture == CU_STREAM_CAPTURE_STATUS_NONE) return;
  Graph* graph = stream->capture_graph;
  stop_capturing(stream);
  if (graph) destroy(graph);
}
}  // namespace gpushare::fake

using namespace gpushare::fake;

extern "C" {

CUresult cuStreamBeginCapture(CUstream stream) {
  return begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr);
}
CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  return begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL, nullptr);
}
CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  return begin_capture(stream, mode, nullptr);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode mode) {
  return begin_capture(stream, mode, nullptr);
}
// Dependencies are ignored: the fake's graphs run their kernels in the order they were added.
CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph graph, const CUgraphNode*,
                                     const CUgraphEdgeData*, size_t, CUstreamCaptureMode mode) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(stream, mode, graph);
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode*,
                                          const CUgraphEdgeData*, size_t,
                                          CUstreamCaptureMode mode) {
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(stream, mode, graph);
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  return end_capture(stream, graph);
}
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  return end_capture(stream, graph);
}
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing(stream, status);
}
CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  return is_capturing(stream, status);
}
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      *mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_mode);
  return CUDA_SUCCESS;
}
}  // extern "C"
