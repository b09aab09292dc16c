#include "settings.h"

#include <errno.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "log.h"

extern char** environ;

namespace gpushare::shim {
namespace {

constexpr std::string_view kPrefix = "GPUSHARE_";
// Read by the fake driver of the test suite (tests/fake_driver), not by the shim.
constexpr std::string_view kFakeDriverPrefix = "GPUSHARE_FAKE_";

void warnf(WarnFn warn, const char* format, const std::string& a, const std::string& b = {}) {
  char message[512];
  std::snprintf(message, sizeof message, format, a.c_str(), b.c_str());
  warn(message);
}

bool parse_bool(std::string_view v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, true;
  return false;
}

bool printable(std::string_view v) {
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

Settings parse_settings(const char* const* env, const char* program_name, WarnFn warn) {
  Settings s;
  s.job_name = program_name && *program_name ? program_name : "unknown";
  if (s.job_name.size() > 63) s.job_name.resize(63);
  for (; env && *env; ++env) {
    std::string_view entry = *env;
    if (entry.substr(0, kPrefix.size()) != kPrefix) continue;
    if (entry.substr(0, kFakeDriverPrefix.size()) == kFakeDriverPrefix) continue;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string key(entry.substr(0, eq));
    std::string_view value = entry.substr(eq + 1);
    std::string v(value);
    if (key == "GPUSHARE_REPORT") {
      if (value.empty()) warnf(warn, "%s is empty: no report will be written", key);
      else s.report_path = v;
    } else if (key == "GPUSHARE_SOCKET") {
      // sun_path holds 108 bytes including the terminating NUL.
      if (value.empty() || value[0] != '/' || value.size() > 107)
        warnf(warn, "%s='%s' is not an absolute path of at most 107 bytes: using the default", key, v);
      else s.socket_path = v;
    } else if (key == "GPUSHARE_JOB") {
      if (value.empty() || value.size() > 63 || !printable(value))
        warnf(warn, "%s='%s' must be 1 to 63 printable characters: using the program name", key, v);
      else s.job_name = v;
    } else if (key == "GPUSHARE_PRIORITY") {
      if (value == "production") s.production = true;
      else if (value == "opportunistic") s.production = false;
      else warnf(warn, "%s='%s' must be production or opportunistic: using opportunistic", key, v);
    } else if (key == "GPUSHARE_REQUIRE_DAEMON" || key == "GPUSHARE_TRACE_ALLOC" ||
               key == "GPUSHARE_QUIET") {
      bool b = false;
      if (!parse_bool(value, &b)) {
        warnf(warn, "%s='%s' must be 1 or 0: using 0", key, v);
        continue;
      }
      if (key == "GPUSHARE_REQUIRE_DAEMON") s.require_daemon = b;
      else if (key == "GPUSHARE_TRACE_ALLOC") s.trace_alloc = b;
      else s.quiet = b;
    } else {
      warnf(warn, "unknown variable %s ignored (known: GPUSHARE_REPORT, GPUSHARE_SOCKET, "
            "GPUSHARE_JOB, GPUSHARE_PRIORITY, GPUSHARE_REQUIRE_DAEMON, GPUSHARE_TRACE_ALLOC, "
            "GPUSHARE_QUIET)%s", key);
    }
  }
  return s;
}

namespace {
Settings* g_settings = nullptr;
std::once_flag g_settings_once;
void warn_to_stderr(const char* message) { log_warning("%s", message); }
}  // namespace

const Settings& settings() {
  // A fork child keeps the parent's (already parsed) settings: the environment is the same.
  std::call_once(g_settings_once, [] {
    g_settings = new Settings(parse_settings(environ, program_invocation_short_name, warn_to_stderr));
  });
  return *g_settings;
}

}  // namespace gpushare::shim
