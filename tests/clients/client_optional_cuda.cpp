// Uses CUDA only when libcuda.so.1 is present, like a framework on a machine without a GPU
// driver: it must behave identically with the shim preloaded on such a machine.
#include <dlfcn.h>

#include <cstdio>

#include "cuda_api.h"

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    std::printf("libcuda.so.1 not found: running without CUDA\n");
    return 0;
  }
  auto init = reinterpret_cast<decltype(&cuInit)>(dlsym(lib, "cuInit"));
  auto version = reinterpret_cast<decltype(&cuDriverGetVersion)>(dlsym(lib, "cuDriverGetVersion"));
  int v = 0;
  int init_result = init != nullptr ? static_cast<int>(init(0)) : -1;
  if (version != nullptr) version(&v);
  std::printf("libcuda.so.1 found: cuInit=%d version=%d\n", init_result, v);
  return 0;
}
