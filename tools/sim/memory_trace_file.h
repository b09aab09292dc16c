// Reading gpushared's memory trace (daemon/memory_trace.h; one JSON object per line) into a
// Recording (memory_replay.h) for `gpushare-sim memory --trace FILE`.
#pragma once

#include <string>

#include "memory_replay.h"

namespace gpushare::sim {

// The recording of `device`; returns an error naming the file, the line and the bad field, or an
// empty string. Unknown events and fields are refused, like traces and cases.
std::string load_memory_trace(const std::string& path, int device, Recording& recording);

}  // namespace gpushare::sim
