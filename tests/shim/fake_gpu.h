// A fake GPU for the shim's unit tests of the launch path's event users (the in-flight bound, the
// completion marks): events complete when the test says so, and every call but queries is recorded
// in order ("create 1", "record 1", "sync 1", "destroy 1"). Its functions are a DriverCalls table
// (fake_driver) that a test's ShimContext is built with; g_gpu is the fixture's GPU.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "driver_calls.h"
#include "shim_context.h"

namespace gpushare::shim::fake {

// A GPU whose work the test finishes by hand. CUevent k is events[k - 1].
struct FakeGpu {
  struct Event {
    bool complete = true;  // a new event is complete until recorded
  };

  void finish(size_t event) {
    std::lock_guard lock(mutex);
    events.at(event - 1).complete = true;
    finished.notify_all();
  }
  void finish_all() {
    std::lock_guard lock(mutex);
    for (Event& e : events) e.complete = true;
    finished.notify_all();
  }
  std::vector<std::string> calls_so_far() {
    std::lock_guard lock(mutex);
    return calls;
  }

  std::mutex mutex;
  std::condition_variable finished;
  std::vector<Event> events;
  std::vector<std::string> calls;  // "create 1", "record 1", "sync 1", "destroy 1" (not queries)
  bool sync_waits = false;  // cuEventSynchronize waits for the test's finish(), else finishes
  CUresult create_result = CUDA_SUCCESS;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  // Another thread of the program captures a graph in global mode (PyTorch's default): an event
  // query from a thread not in relaxed mode fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
  // invalidates that capture, as the driver does.
  bool global_capture_elsewhere = false;
  bool capture_invalidated = false;
  uintptr_t context = 1;
};

// The calling thread's capture mode (cuThreadExchangeStreamCaptureMode), global by default.
inline thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

inline FakeGpu* g_gpu = nullptr;  // the test fixture's

inline size_t id(CUevent e) {
  return reinterpret_cast<uintptr_t>(e);
}

inline CUresult ctx_get_current(CUcontext* context) {
  *context = reinterpret_cast<CUcontext>(g_gpu->context);
  return CUDA_SUCCESS;
}
inline CUresult ctx_set_current(CUcontext) {
  return CUDA_SUCCESS;
}
inline CUresult event_create(CUevent* event, unsigned int) {
  std::lock_guard lock(g_gpu->mutex);
  if (g_gpu->create_result != CUDA_SUCCESS) return g_gpu->create_result;
  g_gpu->events.emplace_back();
  *event = reinterpret_cast<CUevent>(static_cast<uintptr_t>(g_gpu->events.size()));
  g_gpu->calls.push_back("create " + std::to_string(id(*event)));
  return CUDA_SUCCESS;
}
inline CUresult event_record(CUevent event, CUstream) {
  std::lock_guard lock(g_gpu->mutex);
  g_gpu->events.at(id(event) - 1).complete = false;
  g_gpu->calls.push_back("record " + std::to_string(id(event)));
  return CUDA_SUCCESS;
}
inline CUresult event_query(CUevent event) {
  std::lock_guard lock(g_gpu->mutex);
  if (g_gpu->global_capture_elsewhere && t_capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    g_gpu->capture_invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return g_gpu->events.at(id(event) - 1).complete ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
inline CUresult event_synchronize(CUevent event) {
  std::unique_lock lock(g_gpu->mutex);
  g_gpu->calls.push_back("sync " + std::to_string(id(event)));
  FakeGpu::Event& e = g_gpu->events.at(id(event) - 1);
  if (g_gpu->sync_waits)
    g_gpu->finished.wait(lock, [&] { return e.complete; });
  else
    e.complete = true;
  return CUDA_SUCCESS;
}
inline CUresult event_destroy(CUevent event) {
  std::lock_guard lock(g_gpu->mutex);
  g_gpu->calls.push_back("destroy " + std::to_string(id(event)));
  return CUDA_SUCCESS;
}
inline CUresult stream_is_capturing(CUstream, CUstreamCaptureStatus* status) {
  *status = g_gpu->capture;
  return CUDA_SUCCESS;
}

inline CUresult exchange_capture_mode(CUstreamCaptureMode* mode) {
  std::swap(*mode, t_capture_mode);
  return CUDA_SUCCESS;
}

inline const DriverCalls& fake_driver() {
  static const DriverCalls driver = [] {
    DriverCalls d{};
    d.ctx_get_current = ctx_get_current;
    d.ctx_set_current = ctx_set_current;
    d.event_create = event_create;
    d.event_record = event_record;
    d.event_query = event_query;
    d.event_synchronize = event_synchronize;
    d.event_destroy = event_destroy;
    d.stream_is_capturing = stream_is_capturing;
    d.exchange_capture_mode = exchange_capture_mode;
    return d;
  }();
  return driver;
}

// The set-up both suites share: a fake GPU in g_gpu and a context of the test's own on it, with a
// stream to launch into. A suite's TearDown releases what its tracker made, then calls this one's.
class OnFakeGpu : public ::testing::Test {
 protected:
  using Calls = std::vector<std::string>;
  static inline const CUstream kStream = reinterpret_cast<CUstream>(uintptr_t{0x5});

  void SetUp() override { g_gpu = &gpu; }
  void TearDown() override { g_gpu = nullptr; }

  FakeGpu gpu;
  ShimContext ctx{&fake_driver};
};

}  // namespace gpushare::shim::fake
