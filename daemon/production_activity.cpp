#include "production_activity.h"

#include <algorithm>

namespace gpushare::daemon {

bool ProductionActivity::busy(const ProductionSignals& s, uint64_t now_ns,
                              const ActivityTimes& times) {
  const bool launched = !first_ && s.launches != launches_;
  if (first_ || launched) last_launch_ns_ = now_ns;
  if (first_ || launched || s.completed != completed_) last_change_ns_ = now_ns;
  follow_marks(s, now_ns, times);
  first_ = false;
  launches_ = s.launches;
  completed_ = s.completed;
  last_mark_ = s.last_mark;
  // Busy for certain (launching, marked work pending), idle for certain (stale, or nothing left
  // unmarked), or an unmarked tail: busy within the quiet time after the last launch.
  std::optional<bool> certain;
  if (launched) {
    certain = true;
  } else if (now_ns - last_change_ns_ >= times.stale_ns) {
    certain = false;
  } else if (s.completed && s.last_mark <= s.launches && *s.completed < s.last_mark) {
    certain = true;  // marked work not yet complete (a mark past the launches is a scribble)
  } else if (s.completed && s.last_mark >= s.launches) {
    certain = false;
  }
  const uint64_t since_launch = now_ns - last_launch_ns_;
  in_flight_ = certain ? *certain : since_launch < times.quiet_ns;
  return certain ? *certain : since_launch < quiet_ns(times);
}

uint64_t ProductionActivity::quiet_ns(const ActivityTimes& times) const {
  if (lags_seen_ < kLagsKept) return times.quiet_ns;
  const uint64_t longest = *std::max_element(lags_.begin(), lags_.end());
  return std::clamp(longest + times.sample_ns, std::min(times.least_quiet_ns, times.quiet_ns),
                    times.quiet_ns);
}

void ProductionActivity::follow_marks(const ProductionSignals& s, uint64_t now_ns,
                                      const ActivityTimes& times) {
  // Only marks that make sense: tracked, within the launches, moving forward.
  if (!s.completed || s.last_mark > s.launches || (!first_ && s.last_mark < last_mark_)) {
    timed_mark_.reset();
    return;
  }
  if (timed_mark_) {
    if (*s.completed >= *timed_mark_) {
      keep_lag(now_ns - timed_since_ns_);
      timed_mark_.reset();
    } else if (now_ns - timed_since_ns_ >= times.quiet_ns) {
      keep_lag(times.quiet_ns);  // as long as the longest quiet time: no need to time it further
      timed_mark_.reset();
    }
  }
  // A mark first seen in this sample is timed from here; one already complete when first seen
  // ran less than a sample behind.
  if (!timed_mark_ && !first_ && s.last_mark != last_mark_) {
    if (*s.completed >= s.last_mark) {
      keep_lag(0);
    } else {
      timed_mark_ = s.last_mark;
      timed_since_ns_ = now_ns;
    }
  }
}

void ProductionActivity::keep_lag(uint64_t lag_ns) {
  lags_[lags_seen_ % kLagsKept] = lag_ns;
  ++lags_seen_;
}

}  // namespace gpushare::daemon
