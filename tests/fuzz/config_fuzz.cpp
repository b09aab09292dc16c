// Fuzzes daemon/config.cpp's parse_config with arbitrary text: it must answer with a Config or
// with errors, never crash, throw or hang (the daemon parses the file again on SIGHUP, so a bad
// edit must not take a running daemon down).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gpushare::daemon::ConfigResult result = gpushare::daemon::parse_config(text);
  if (!result.config && result.errors.empty()) __builtin_trap();  // neither answer nor reason
  (void)result.error_text();
  return 0;
}
