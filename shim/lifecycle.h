// Process lifecycle: the first cuInit (registration), fork, exit.
#pragma once

#include "cuda_api.h"

namespace gpushare::shim {

// Runs once per process after the first successful real cuInit: registers with the daemon.
// Returns CUDA_SUCCESS, or an error when GPUSHARE_REQUIRE_DAEMON=1 and no daemon is reachable
// (then it retries on the next cuInit).
CUresult on_first_init();

}  // namespace gpushare::shim
