// The JSON form of a memory case (memory_model.h) for `gpushare-sim memory --case FILE`; the
// format is in docs/simulator.md.
#pragma once

#include <string>

#include "memory_model.h"

namespace gpushare::sim {

// Reads a case; returns an error naming the file and the bad field, or an empty string. Jobs
// arrive in the order listed (FIFO).
std::string load_memory_case(const std::string& path, MemoryCase& memory_case);

}  // namespace gpushare::sim
