// Replaces itself with another program (execv), optionally after initialising CUDA: the shim
// preloaded into the first image must be preloaded and working again in the new one.
//   client_exec [--init-first] <program> [arguments...]
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cuda_api.h"

int main(int argc, char** argv) {
  int first = 1;
  bool init_first = argc > 1 && std::strcmp(argv[1], "--init-first") == 0;
  if (init_first) ++first;
  if (first >= argc) {
    std::fprintf(stderr, "usage: client_exec [--init-first] <program> [arguments...]\n");
    return 2;
  }
  if (init_first) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    auto init =
        lib != nullptr ? reinterpret_cast<decltype(&cuInit)>(dlsym(lib, "cuInit")) : nullptr;
    if (init == nullptr || init(0) != CUDA_SUCCESS) {
      std::fprintf(stderr, "client_exec: cuInit failed\n");
      return 3;
    }
  }
  std::fflush(stdout);
  execv(argv[first], argv + first);
  std::fprintf(stderr, "client_exec: execv %s: %s\n", argv[first], std::strerror(errno));
  return 127;
}
