#include "production_activity.h"

namespace gpushare::daemon {

bool ProductionActivity::busy(const ProductionSignals& s, uint64_t now_ns,
                              const ActivityTimes& times) {
  const bool launched = !first_ && s.launches != launches_;
  if (first_ || launched) last_launch_ns_ = now_ns;
  if (first_ || launched || s.completed != completed_) last_change_ns_ = now_ns;
  first_ = false;
  launches_ = s.launches;
  completed_ = s.completed;
  if (launched) return true;
  if (now_ns - last_change_ns_ >= times.stale_ns) return false;
  // Marked work not yet complete. A mark past the launches counted is a scribble: ignored.
  const bool marked_pending =
      s.completed && s.last_mark <= s.launches && *s.completed < s.last_mark;
  if (marked_pending) return true;
  const bool unmarked_tail = !s.completed || s.last_mark < s.launches;
  return unmarked_tail && now_ns - last_launch_ns_ < times.quiet_ns;
}

}  // namespace gpushare::daemon
