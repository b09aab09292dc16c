// gpushared's log: spdlog to stderr, one line per event. Under systemd (JOURNAL_STREAM set) the
// line carries no timestamp (journald adds its own) and starts with a "<N>" syslog priority,
// which journald turns into the entry's level.
#pragma once

#include <string>
#include <string_view>

namespace gpushare::daemon {

void setup_logging(const std::string& level);
void set_log_level(const std::string& level);

// A log field whose text a client chose (job name, allocation site): as it is when it is one
// plain word, else in double quotes with '"', '\\' and non-printable bytes escaped, so a name
// such as "a uid=0 class=production" can never pass for fields of its own.
std::string log_text(std::string_view text);

}  // namespace gpushare::daemon
