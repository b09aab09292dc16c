// What the shim's own event calls must respect while the program captures a CUDA graph (the
// in-flight bound and the completion marks both record events on the program's streams).
//
// Event calls are "potentially unsafe" during a stream capture in global mode: made from a thread
// while another captures, they would invalidate that capture. The shim's calls run in relaxed
// mode (the mechanism CUDA provides to libraries for this), and a launch into a capturing stream
// gets no event at all: it runs nothing until its graph is launched, and an event recorded there
// would become a node of the program's graph.
//
// A context synchronisation is worse: it invalidates every capture in progress on its device,
// whatever the capture's mode and whichever thread synchronises. The swap thread needs one for
// each move of the job's memory, so moves and captures exclude each other (CaptureExclusion).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

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

// cuStreamIsCapturing for the entry point a call came through (_ptsz: the per-thread stream);
// nullptr when the driver has none.
inline auto is_capturing_entry(const DriverCalls& d, bool per_thread) {
  return per_thread && d.stream_is_capturing_ptsz ? d.stream_is_capturing_ptsz
                                                  : d.stream_is_capturing;
}

// Whether `stream` is capturing. A failed query (an invalidated capture, say) counts as
// capturing: leave that stream alone.
inline bool capturing(const DriverCalls& d, CUstream stream, bool per_thread) {
  auto fn = is_capturing_entry(d, per_thread);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return fn && (fn(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE);
}

// After the program's cuStreamEndCapture: whether `stream` no longer captures. The call ends the
// capture unless it was refused (another thread's capture, no capture at all); a stream that can
// no longer be queried captures nothing either.
inline bool capture_over(const DriverCalls& d, CUstream stream, bool per_thread) {
  auto fn = is_capturing_entry(d, per_thread);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return !fn || fn(stream, &status) != CUDA_SUCCESS || status == CU_STREAM_CAPTURE_STATUS_NONE;
}

// Which stream a capture call names: a created stream is itself; the per-thread default stream
// (CU_STREAM_PER_THREAD, or the null stream through a _ptsz entry point) is the calling thread's.
struct CaptureKey {
  CUstream stream;
  pid_t thread;  // 0 for a created stream
  bool operator==(const CaptureKey&) const = default;
};
CaptureKey capture_key(CUstream stream, bool per_thread);

// The program's captures in progress against the swap thread's moves of its memory: a move never
// runs beside a capture. A move waits until no capture is in progress (within a patience: the
// daemon waits for the move, and production memory comes first); a capture that begins during a
// move waits for the move's end (the daemon pauses the job for it anyway). The program's side
// costs a lock per cuStreamBeginCapture and cuStreamEndCapture, never a launch.
class CaptureExclusion {
 public:
  // Around the program's cuStreamBeginCapture: before it, waits while a move is in progress;
  // after it, the capture counts if it began.
  void before_begin();
  void after_begin(CaptureKey key, bool began);
  // After the program's cuStreamEndCapture, with whether the capture is over.
  void after_end(CaptureKey key, bool over);

  // The swap thread's side. Waits until no capture is in progress, at most `patience`; from then
  // until end_move() captures wait. Returns false when the patience ran out with captures still
  // in progress (the move goes ahead: the caller says so). A capture a move went ahead beside is
  // not waited for again: that move invalidated it (a capture the program leaked, or one longer
  // than the patience, delays one move, not every move until it ends).
  bool begin_move(std::chrono::milliseconds patience);
  void end_move();

  // Captures in progress now (or beginning).
  size_t in_progress();
  // In a fork child: no capture and no move is in progress there.
  void reset_after_fork();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  struct Capture {
    CaptureKey key;
    bool invalidated = false;  // a move went ahead beside it
  };
  // Whether a move must wait: a capture is beginning, or one in progress is still intact.
  bool move_must_wait() const;

  std::vector<Capture> captures_;
  int beginning_ = 0;  // cuStreamBeginCapture calls between before_begin and after_begin
  bool moving_ = false;
};

// A move as a scope: begun at construction (waiting for the captures in progress, at most
// `patience`), ended at destruction, whatever happens in between.
class ExclusiveMove {
 public:
  ExclusiveMove(CaptureExclusion& captures, std::chrono::milliseconds patience)
      : captures_(captures), clear_(captures.begin_move(patience)) {}
  ~ExclusiveMove() { captures_.end_move(); }
  ExclusiveMove(const ExclusiveMove&) = delete;
  ExclusiveMove& operator=(const ExclusiveMove&) = delete;
  // False when the patience ran out with captures still in progress.
  bool clear() const { return clear_; }

 private:
  CaptureExclusion& captures_;
  bool clear_;
};

// The process's one: the hooks and the swap thread share it.
CaptureExclusion& capture_exclusion();

}  // namespace gpushare::shim
