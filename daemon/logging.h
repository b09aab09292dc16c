// gpushared's log: spdlog to stderr, one line per event. Under systemd (JOURNAL_STREAM set) the
// line carries no timestamp (journald adds its own) and starts with a "<N>" syslog priority,
// which journald turns into the entry's level.
#pragma once

#include <string>

namespace gpushare::daemon {

void setup_logging(const std::string& level);
void set_log_level(const std::string& level);

}  // namespace gpushare::daemon
