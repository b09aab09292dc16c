#include "stream_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <new>

namespace gpushare::shim {

CaptureKey capture_key(CUstream stream, bool per_thread) {
  const bool thread_stream = stream == CU_STREAM_PER_THREAD || (per_thread && stream == nullptr);
  if (!thread_stream) return {stream, 0};
  return {CU_STREAM_PER_THREAD, static_cast<pid_t>(syscall(SYS_gettid))};
}

void CaptureExclusion::before_begin() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !moving_; });
  ++beginning_;
}

void CaptureExclusion::after_begin(CaptureKey key, bool began) {
  std::lock_guard lock(mutex_);
  --beginning_;
  if (began) captures_.push_back({key});
  changed_.notify_all();
}

void CaptureExclusion::after_end(CaptureKey key, bool over) {
  if (!over) return;
  std::lock_guard lock(mutex_);
  auto it = std::find_if(captures_.begin(), captures_.end(),
                         [&](const Capture& c) { return c.key == key; });
  if (it == captures_.end()) return;  // begun before the shim was loaded, or never counted
  captures_.erase(it);
  changed_.notify_all();
}

bool CaptureExclusion::move_must_wait() const {
  return beginning_ > 0 || std::any_of(captures_.begin(), captures_.end(),
                                       [](const Capture& c) { return !c.invalidated; });
}

bool CaptureExclusion::begin_move(std::chrono::milliseconds patience) {
  std::unique_lock lock(mutex_);
  const bool clear = changed_.wait_for(lock, patience, [this] { return !move_must_wait(); });
  for (Capture& c : captures_) c.invalidated = true;  // this move's synchronisation does it
  moving_ = true;
  return clear;
}

void CaptureExclusion::end_move() {
  std::lock_guard lock(mutex_);
  moving_ = false;
  changed_.notify_all();
}

size_t CaptureExclusion::in_progress() {
  std::lock_guard lock(mutex_);
  return captures_.size() + static_cast<size_t>(beginning_);
}

void CaptureExclusion::reset_after_fork() {
  // Only this thread exists in the child; another parent thread may have held the mutex, so the
  // old state is overwritten, not destroyed.
  new (this) CaptureExclusion;
}

CaptureExclusion& capture_exclusion() {
  // Leaked on purpose: a capture call or the swap thread may run during exit().
  static CaptureExclusion* exclusion = new CaptureExclusion;
  return *exclusion;
}

}  // namespace gpushare::shim
