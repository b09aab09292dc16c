#include "log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "settings.h"

namespace gpushare::shim {
namespace {

void write_line(const char* level, const char* format, va_list args) {
  char line[1024];
  int n = std::snprintf(line, sizeof line, "gpushare[%d]: %s", static_cast<int>(getpid()), level);
  if (n < 0) return;
  int m = std::vsnprintf(line + n, sizeof line - n, format, args);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  ssize_t written = ::write(STDERR_FILENO, line, len);
  (void)written;  // nothing sensible to do when stderr is gone
}

}  // namespace

void log_warning(const char* format, ...) {
  va_list args;
  va_start(args, format);
  write_line("warning: ", format, args);
  va_end(args);
}

void log_info(const char* format, ...) {
  if (settings().quiet) return;
  va_list args;
  va_start(args, format);
  write_line("", format, args);
  va_end(args);
}

}  // namespace gpushare::shim
