// `gpusharectl record --seconds N -o trace.json`: polls the daemon once a tick and writes the
// timeline (timeline.h) as Chrome/Perfetto trace-event JSON.
#pragma once

#include <string>

namespace gpushare::ctl {

// Returns an error message, or "" once `path` is written.
std::string record(const std::string& socket_path, double seconds, const std::string& path);

}  // namespace gpushare::ctl
