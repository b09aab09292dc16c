// Fake driver: initialisation, devices, contexts, streams, events and error strings.
// By default launches are synchronous, so every stream is always complete, and so is every event
// unless GPUSHARE_FAKE_EVENT_DELAY_US delays it (see record_event). With
// GPUSHARE_FAKE_ASYNC_KERNELS=1 (kernel_queue.h) a stream is complete when the queue reached its
// tail (stream_tail), an event when the queue reached the position it was recorded at, and
// cuCtxSynchronize waits for the whole queue of the current context's device.
// GPUSHARE_FAKE_EXIT_HOLD_MS=N: as the process exits the driver shuts down as the real one does
// (every call answers CUDA_ERROR_DEINITIALIZED from then on: shut_down_at_exit) and holds the exit
// N ms, so that a test can meet a process whose driver is gone while its daemon connection lives.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "driver_objects.h"
#include "simulated_device.h"
#include "visible_devices.h"

namespace gpushare::fake {
namespace {
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_shut_down{false};
thread_local Context* t_current = nullptr;
Context g_primary[kMaxDevices];
std::mutex g_primary_lock;
// The physical device of each ordinal: CUDA_VISIBLE_DEVICES, read once by the first cuInit, as
// the real driver does. Written before g_initialized is set, read only after.
std::vector<int> g_visible;
std::once_flag g_visible_once;

// cuStreamSynchronize (`wait`) and cuStreamQuery.
CUresult sync_stream(CUstream stream, bool wait) {
  REQUIRE_INIT();
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  if (!async_kernels()) return CUDA_SUCCESS;
  const uint64_t tail = stream_tail(stream, device);
  if (wait) wait_for_position(device, tail);
  return position_reached(device, tail) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// GPUSHARE_FAKE_EVENT_DELAY_US: an event completes this long after it is recorded, as if the
// kernels before it were still queued (tests of the shim's in-flight bound).
uint64_t event_delay_ns() {
  static const uint64_t delay = [] {
    const char* v = getenv("GPUSHARE_FAKE_EVENT_DELAY_US");
    return v ? strtoull(v, nullptr, 10) * 1000 : 0;
  }();
  return delay;
}

CUresult record_event(CUevent event, CUstream stream) {
  REQUIRE_INIT();
  Event* e = as<Event>(event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  int device = 0;
  if (CUresult r = stream_device(stream, &device); r != CUDA_SUCCESS) return r;
  e->recorded_ns = now_ns();
  e->complete_ns = e->recorded_ns + event_delay_ns();
  e->mark = async_kernels() ? mark_position(device, stream_tail(stream, device)) : nullptr;
  return CUDA_SUCCESS;
}

// When the work before the event was done: the time its queue mark was reached (async mode), the
// recording time otherwise; 0 while not done.
uint64_t event_time(const Event& e) {
  return e.mark ? e.mark->reached_ns.load(std::memory_order_acquire) : e.recorded_ns;
}

CUresult elapsed_time(float* ms, CUevent start, CUevent end) {
  REQUIRE_INIT();
  Event* a = as<Event>(start);
  Event* b = as<Event>(end);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (a->recorded_ns == 0 || b->recorded_ns == 0) return CUDA_ERROR_INVALID_HANDLE;
  const uint64_t ta = event_time(*a), tb = event_time(*b);
  if (ta == 0 || tb == 0) return CUDA_ERROR_NOT_READY;  // as the real driver, for pending events
  *ms = static_cast<float>(static_cast<double>(tb) - static_cast<double>(ta)) / 1e6f;
  return CUDA_SUCCESS;
}
// The process exits: the driver shuts down (a line on stderr says so, for tests to wait on) and
// the exit waits GPUSHARE_FAKE_EXIT_HOLD_MS.
void shut_down_at_exit() {
  g_shut_down.store(true, std::memory_order_release);
  constexpr char kLine[] = "fake driver: shut down at exit\n";
  ssize_t written = write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
  (void)written;
  const char* hold = std::getenv("GPUSHARE_FAKE_EXIT_HOLD_MS");
  std::this_thread::sleep_for(
      std::chrono::milliseconds(hold ? std::strtoull(hold, nullptr, 10) : 0));
}
}  // namespace

CUresult driver_state() {
  if (g_shut_down.load(std::memory_order_acquire)) return CUDA_ERROR_DEINITIALIZED;
  return g_initialized.load(std::memory_order_acquire) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
void mark_initialized() {
  g_initialized.store(true, std::memory_order_release);
}
Context* current_context() {
  return t_current;
}
void set_current_context(Context* context) {
  t_current = context;
}

Context* primary_context(int device) {
  Context* c = &g_primary[device];
  c->device = device;
  c->primary = true;
  return c;
}

bool valid_device(CUdevice device) {
  return physical_device(device) >= 0;
}

int physical_device(CUdevice ordinal) {
  return ordinal >= 0 && static_cast<size_t>(ordinal) < g_visible.size() ? g_visible[ordinal] : -1;
}

CUdevice ordinal_of(int physical) {
  for (size_t i = 0; i < g_visible.size(); ++i)
    if (g_visible[i] == physical) return static_cast<CUdevice>(i);
  return -1;
}

CUresult current_device(int* device) {
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = t_current->device;
  return CUDA_SUCCESS;
}

CUresult stream_device(CUstream stream, int* device) {
  if (is_default_stream(stream)) {
    return current_device(device);
  }
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *device = s->context->device;
  return CUDA_SUCCESS;
}

uint64_t stream_tail(CUstream stream, int device) {
  if (Stream* s = as<Stream>(stream)) return s->last_kernel.load(std::memory_order_acquire);
  return queue_tail(device);
}

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace gpushare::fake

using namespace gpushare::fake;

extern "C" {

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (open_device_file() == nullptr || device_count() == 0) return CUDA_ERROR_NO_DEVICE;
  std::call_once(g_visible_once, [] {
    std::vector<gpushare::protocol::DeviceUuid> uuids;
    for (int d = 0; d < device_count(); ++d) uuids.push_back(device_uuid(d));
    g_visible = visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"), uuids);
  });
  if (g_visible.empty()) return CUDA_ERROR_NO_DEVICE;
  if (g_shut_down.load(std::memory_order_acquire)) return CUDA_ERROR_DEINITIALIZED;
  static std::once_flag exit_hook;
  std::call_once(exit_hook, [] {
    if (std::getenv("GPUSHARE_FAKE_EXIT_HOLD_MS")) std::atexit(shut_down_at_exit);
  });
  mark_initialized();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  REQUIRE_INIT();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(g_visible.size());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  REQUIRE_INIT();
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(length), "gpushare fake device %d",
                physical_device(device));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) {
  REQUIRE_INIT();
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  const gpushare::protocol::DeviceUuid bytes = device_uuid(physical_device(device));
  static_assert(sizeof uuid->bytes == bytes.size());
  std::memcpy(uuid->bytes, bytes.data(), bytes.size());
  return CUDA_SUCCESS;
}

// The first version: the same 16 bytes (the real one differs only for MIG instances).
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  return cuDeviceGetUuid_v2(uuid, device);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  REQUIRE_INIT();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(g_primary_lock);
  Context* c = primary_context(physical_device(device));
  ++c->primary_refs;
  *context = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  REQUIRE_INIT();
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(g_primary_lock);
  Context* c = primary_context(physical_device(device));
  if (c->primary_refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --c->primary_refs;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return cuDevicePrimaryCtxRelease_v2(device);
}

CUresult cuCtxCreate_v2(CUcontext* context, unsigned int /*flags*/, CUdevice device) {
  REQUIRE_INIT();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  auto* c = new Context;
  c->device = physical_device(device);
  t_current = c;  // the real driver pushes the new context onto the thread's stack
  *context = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy_v2(CUcontext context) {
  REQUIRE_INIT();
  Context* c = as<Context>(context);
  if (c == nullptr || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_current == c) t_current = nullptr;
  destroy(c);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  REQUIRE_INIT();
  if (context != nullptr && as<Context>(context) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = as<Context>(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  REQUIRE_INIT();
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = reinterpret_cast<CUcontext>(t_current);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int physical = 0;
  if (CUresult r = current_device(&physical); r != CUDA_SUCCESS) return r;
  *device = ordinal_of(physical);
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  REQUIRE_INIT();
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = capture_conflict(CaptureConflict::context_sync, t_current->device);
      r != CUDA_SUCCESS)
    return r;
  if (async_kernels()) wait_for_position(t_current->device, queue_tail(t_current->device));
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int /*flags*/) {
  REQUIRE_INIT();
  if (stream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* s = new Stream;
  s->context = t_current;
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  REQUIRE_INIT();
  Stream* s = as<Stream>(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  forget_capture(s);
  destroy(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream stream) {
  return cuStreamDestroy_v2(stream);
}
CUresult cuStreamSynchronize(CUstream stream) {
  return sync_stream(stream, true);
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  return sync_stream(stream, true);
}
CUresult cuStreamQuery(CUstream stream) {
  return sync_stream(stream, false);
}
CUresult cuStreamQuery_ptsz(CUstream stream) {
  return sync_stream(stream, false);
}

CUresult cuEventCreate(CUevent* event, unsigned int /*flags*/) {
  REQUIRE_INIT();
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *event = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  return record_event(event, stream);
}
CUresult cuEventRecord_ptsz(CUevent event, CUstream stream) {
  return record_event(event, stream);
}

// The device a call without a stream conflicts on: the current context's.
int call_device() {
  return t_current ? t_current->device : 0;
}

CUresult cuEventQuery(CUevent event) {
  REQUIRE_INIT();
  Event* e = as<Event>(event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = capture_conflict(CaptureConflict::unsafe_call, call_device()); r != CUDA_SUCCESS)
    return r;
  if (e->mark && e->mark->reached_ns.load(std::memory_order_acquire) == 0)
    return CUDA_ERROR_NOT_READY;
  return now_ns() >= e->complete_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent event) {
  REQUIRE_INIT();
  Event* e = as<Event>(event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = capture_conflict(CaptureConflict::unsafe_call, call_device()); r != CUDA_SUCCESS)
    return r;
  if (e->mark) wait_for_position(e->mark->device, e->mark->position);
  for (uint64_t now = now_ns(); now < e->complete_ns; now = now_ns())
    std::this_thread::sleep_for(std::chrono::nanoseconds(e->complete_ns - now));
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return elapsed_time(ms, start, end);
}
CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return elapsed_time(ms, start, end);
}

CUresult cuEventDestroy_v2(CUevent event) {
  REQUIRE_INIT();
  Event* e = as<Event>(event);
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  destroy(e);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent event) {
  return cuEventDestroy_v2(event);
}

#define FAKE_ERRORS(X)                                                                         \
  X(CUDA_SUCCESS, "no error")                                                                  \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                              \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                 \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                        \
  X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                       \
  X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                \
  X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                      \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                      \
  X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                            \
  X(CUDA_ERROR_NOT_READY, "device not ready")                                                  \
  X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                       \
  X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported")                  \
  X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")        \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,                                                     \
    "operation failed due to a previous error during capture")                                 \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                                        \
    "operation would make the legacy stream depend on a capturing blocking stream")            \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,                                                    \
    "attempt to terminate a thread-local capture sequence from another thread")                \
  X(CUDA_ERROR_UNKNOWN, "unknown error")

CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
#define FAKE_NAME(code, text) \
  if (error == code) return *name = #code, CUDA_SUCCESS;
  FAKE_ERRORS(FAKE_NAME)
#undef FAKE_NAME
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
#define FAKE_TEXT(code, message) \
  if (error == code) return *text = message, CUDA_SUCCESS;
  FAKE_ERRORS(FAKE_TEXT)
#undef FAKE_TEXT
  *text = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
}  // extern "C"
