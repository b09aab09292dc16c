// The LD_PRELOAD value that puts the shim into a test's child process. In a sanitized build
// (scripts/test-sanitizers.sh) the sanitizer's runtime must be the first library the loader maps,
// or ASan aborts the child ("runtime does not come first in initial library list"): the children
// are sanitized executables, but LD_PRELOAD is mapped before their own dependencies. CMake
// passes the runtime's path as GPUSHARE_SANITIZER_RUNTIME (`$CXX -print-file-name=libasan.so`).
#pragma once

#include <string>

namespace gpushare::testing {

inline std::string shim_preload(const std::string& shim) {
#ifdef GPUSHARE_SANITIZER_RUNTIME
  return std::string(GPUSHARE_SANITIZER_RUNTIME) + ":" + shim;
#else
  return shim;
#endif
}

}  // namespace gpushare::testing
