// What the shim's own event calls must respect while the program captures a CUDA graph (the
// in-flight bound and the completion marks both record events on the program's streams).
//
// Event calls are "potentially unsafe" during a stream capture in global mode: made from a thread
// while another captures, they would invalidate that capture. The shim's calls run in relaxed
// mode (the mechanism CUDA provides to libraries for this), and a launch into a capturing stream
// gets no event at all: it runs nothing until its graph is launched, and an event recorded there
// would become a node of the program's graph.
#pragma once

#include "cuda_api.h"
#include "driver_calls.h"

namespace gpushare::shim {

// `driver` is the caller's: driver_calls(), or a test's fake functions.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const DriverCalls& driver) : driver_(driver) {
    if (auto fn = driver_.exchange_capture_mode) active_ = fn(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCapture() {
    if (active_) driver_.exchange_capture_mode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const DriverCalls& driver_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool active_ = false;
};

// Whether `stream` is capturing. A failed query (an invalidated capture, say) counts as
// capturing: leave that stream alone.
inline bool capturing(const DriverCalls& d, CUstream stream, bool per_thread) {
  auto fn =
      per_thread && d.stream_is_capturing_ptsz ? d.stream_is_capturing_ptsz : d.stream_is_capturing;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return fn && (fn(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE);
}

}  // namespace gpushare::shim
