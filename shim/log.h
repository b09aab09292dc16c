// The shim's only output: one line on stderr, written with a single write(2) so lines of
// concurrent threads never interleave. Never used on the launch path.
#pragma once

namespace gpushare::shim {

void log_warning(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace gpushare::shim
