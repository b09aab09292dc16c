// Rate limit for log lines that a client can cause: a client that sends bad
// frames, connects in a loop or asks for memory it is refused must not be able to fill the disk.
//
// Lines are grouped by a key that names the client and the reason (e.g. "uid=1000 drop: bad
// frame"). In each window of `window` from a key's first line, the first `burst` lines are
// written; the rest are counted, and when the window ends one summary line says how many were
// suppressed. Pure bookkeeping: the caller supplies the time and writes the lines, so a unit test
// drives it with made-up times.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

namespace gpushare::daemon {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // At most this many keys are tracked; beyond it new keys share one, so a client that invents
  // keys (many uids, many reasons) cannot grow the table.
  static constexpr size_t kMaxKeys = 4096;
  static constexpr const char* kOverflowKey = "(other clients and reasons)";

  explicit LogLimiter(uint32_t burst = 5, Clock::duration window = std::chrono::seconds(10))
      : burst_(burst), window_(window) {}

  // Whether a line of `key` may be written now (false: it is counted as suppressed).
  bool admit(const std::string& key, Clock::time_point now);

  // Ends the windows that are over: `summary(key, suppressed)` is called for each that suppressed
  // lines, and the window is forgotten. Call it regularly (the daemon does on its tick).
  void flush(Clock::time_point now,
             const std::function<void(const std::string& key, uint64_t suppressed)>& summary);

  size_t keys() const { return windows_.size(); }

 private:
  struct Window {
    Clock::time_point start;
    uint32_t written = 0;
    uint64_t suppressed = 0;
  };
  uint32_t burst_;
  Clock::duration window_;
  std::unordered_map<std::string, Window> windows_;
};

// The part of a reason that stays the same between lines of one kind: up to the first digit,
// quote or '(' (sizes, ids and names vary), e.g. "bad frame: bad magic (26 bytes, …" ->
// "bad frame: bad magic". Used to key lines whose text carries numbers.
std::string reason_kind(const std::string& reason);

}  // namespace gpushare::daemon
