// What a program sees of MPS through the shim: the CUDA_MPS_* variables before and after its
// cuInit, as one JSON line. The shim must have set them by the time the real cuInit ran, and not
// before the program called cuInit (tests/daemon/mps_test.cpp).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cuda_api.h"

namespace {

nlohmann::json mps_variables() {
  nlohmann::json vars = nlohmann::json::object();
  for (const char* name : {"CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_CLIENT_PRIORITY",
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"}) {
    const char* value = std::getenv(name);
    vars[name] = value ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  return vars;
}

}  // namespace

int main() {
  nlohmann::json out;
  out["before"] = mps_variables();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  auto init = lib ? reinterpret_cast<decltype(&cuInit)>(dlsym(lib, "cuInit")) : nullptr;
  out["cuInit"] = init ? static_cast<int>(init(0)) : -1;
  out["after"] = mps_variables();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
