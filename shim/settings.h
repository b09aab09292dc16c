// The shim's configuration, read once from GPUSHARE_* variables on the first CUDA call (or at exit
// when the program never used CUDA). A malformed value gives one clear warning and the default;
// an unknown GPUSHARE_* name gives one warning too, since it is most likely a typo.
#pragma once

#include <string>

namespace gpushare::shim {

struct Settings {
  std::string report_path;           // GPUSHARE_REPORT: JSON counters written at exit; "" = none
  std::string socket_path = "/run/gpushare/gpushared.sock";  // GPUSHARE_SOCKET
  std::string job_name;              // GPUSHARE_JOB, else the program name
  bool production = false;           // GPUSHARE_PRIORITY=production|opportunistic
  bool require_daemon = false;       // GPUSHARE_REQUIRE_DAEMON=1: fail closed without a daemon
  bool trace_alloc = false;          // GPUSHARE_TRACE_ALLOC=1: record allocation call sites
  bool quiet = false;                // GPUSHARE_QUIET=1: no informational messages on stderr
};

// Parses `environ` once; later calls return the same object. Thread-safe.
const Settings& settings();

// Parses the given KEY=VALUE strings (null-terminated array) into `out`; each problem is passed
// to `warn` once. Pure; used by settings() and by the unit tests.
using WarnFn = void (*)(const char* message);
Settings parse_settings(const char* const* env, const char* program_name, WarnFn warn);

// Re-arms settings() after fork so the child could re-read (it keeps the parent's values).
}  // namespace gpushare::shim
