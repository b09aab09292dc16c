// Which CUDA_MPS_* variables the shim puts in the environment before the real cuInit
// (docs/mps.md): a pure function of the daemon's answer and the variables the program already has,
// so the unit tests drive it without a daemon or a driver.
//
// The daemon's answer wins where the program asks for more than it grants, with one warning per
// variable; a program may always ask for less (a lower priority, fewer threads), as it may lower
// its own class with gpusharectl. A different pipe directory is replaced, with a warning: two MPS
// servers on one GPU would be time-sliced against each other, out of gpushared's sight.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpushare::shim {

// The daemon's "use MPS" answer.
struct MpsGrant {
  uint32_t client_priority = 1;    // 0 normal (production), 1 below normal (opportunistic)
  uint32_t thread_percentage = 0;  // 1..100; 0: no limit
  std::string pipe_directory;
};

struct MpsEnvironment {
  std::vector<std::pair<std::string, std::string>> set;  // name, value: to setenv
  std::vector<std::string> warnings;                     // one line each, for stderr
};

// `current` reads the program's environment (getenv; nullptr when unset). No grant: nothing.
using EnvLookup = std::function<const char*(const char*)>;
MpsEnvironment decide_mps_environment(const std::optional<MpsGrant>& grant,
                                      const EnvLookup& current);

}  // namespace gpushare::shim
