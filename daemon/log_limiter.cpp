#include "log_limiter.h"

#include <cctype>
#include <vector>

namespace gpushare::daemon {

bool LogLimiter::admit(const std::string& key, Clock::time_point now) {
  auto it = windows_.find(key);
  if (it == windows_.end()) {
    const std::string& k = windows_.size() < kMaxKeys ? key : std::string(kOverflowKey);
    it = windows_.try_emplace(k, Window{now, 0, 0}).first;
  }
  Window& w = it->second;
  if (now - w.start >= window_ && w.suppressed == 0) w = Window{now, 0, 0};  // a fresh window
  if (w.written < burst_) {
    ++w.written;
    return true;
  }
  ++w.suppressed;
  return false;
}

void LogLimiter::flush(
    Clock::time_point now,
    const std::function<void(const std::string& key, uint64_t suppressed)>& summary) {
  std::vector<std::string> done;
  for (auto& [key, w] : windows_)
    if (now - w.start >= window_) done.push_back(key);
  for (const std::string& key : done) {
    auto it = windows_.find(key);
    if (it->second.suppressed) summary(key, it->second.suppressed);
    windows_.erase(it);
  }
}

std::string reason_kind(const std::string& reason) {
  size_t end = 0;
  while (end < reason.size() && !std::isdigit(static_cast<unsigned char>(reason[end])) &&
         reason[end] != '\'' && reason[end] != '"' && reason[end] != '(')
    ++end;
  while (end > 0 && (reason[end - 1] == ' ' || reason[end - 1] == ':')) --end;
  return reason.substr(0, end);
}

}  // namespace gpushare::daemon
