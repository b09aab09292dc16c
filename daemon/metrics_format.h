// The Prometheus text exposition (format 0.0.4) of one metrics snapshot: a pure function, so a
// unit test checks names, labels, escaping and values without a daemon or an HTTP server.
#pragma once

#include <string>
#include <string_view>

#include "metrics_snapshot.h"

namespace gpushare::daemon {

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string format_metrics(const MetricsSnapshot& snapshot);

// A label value as the exposition format wants it between its quotes: backslash, double quote and
// newline escaped; bytes that are not valid UTF-8 replaced by U+FFFD (Prometheus rejects a scrape
// with invalid UTF-8, and job names come from clients).
std::string escape_label_value(std::string_view value);

}  // namespace gpushare::daemon
