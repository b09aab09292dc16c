// Obtains every entry point with dlsym, the way torch's driver wrapper, cuBLAS and NVRTC do:
// --mode handle (dlsym on the dlopen handle), default (RTLD_DEFAULT) or next (RTLD_NEXT).
// Also reports where dlsym sends names the shim must leave alone (a non-hooked driver symbol, a
// libc symbol, misspelt hooked names), so a test can compare them with and without the shim.
#include <dlfcn.h>

#include <CLI/CLI.hpp>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

namespace {
void* lookup(void* handle, const char* name) {
  return dlsym(handle, name);
}

// {"symbol", "object", "offset"}: comparable between runs despite address randomisation.
nlohmann::json where(const void* p) {
  Dl_info info{};
  if (p == nullptr || dladdr(p, &info) == 0) return nullptr;
  return {{"symbol", symbol_of(p)},
          {"object", object_of(p)},
          {"offset", static_cast<const char*>(p) - static_cast<const char*>(info.dli_fbase)}};
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"driver client using dlsym"};
  ExerciseOptions options;
  add_exercise_options(app, options);
  std::string mode = "handle";
  app.add_option("--mode", mode, "handle | default | next")
      ->check(CLI::IsMember({"handle", "default", "next"}));
  CLI11_PARSE(app, argc, argv);

  // default and next find the driver only in the global scope, as for a program that dlopens
  // libcuda.so.1 with RTLD_GLOBAL (or links it).
  void* lib = dlopen("libcuda.so.1", mode == "handle" ? RTLD_NOW : RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return print_result({{"error", "dlopen libcuda.so.1 failed"}});
  void* handle = mode == "handle" ? lib : mode == "default" ? RTLD_DEFAULT : RTLD_NEXT;

  DriverApi api;
  if (std::string missing = resolve_by_symbol(api, lookup, handle, options.per_thread);
      !missing.empty()) {
    return print_result({{"error", "dlsym found no " + missing}});
  }
  nlohmann::json result = run_exercise(api, options);
  result["client"] = "dlsym";
  result["mode"] = mode;
  result["non_hooked"] = {
      {"cuCtxSynchronize", where(dlsym(handle, "cuCtxSynchronize"))},
      {"cuGetErrorString", where(dlsym(handle, "cuGetErrorString"))},
      {"getpid_next", where(dlsym(RTLD_NEXT, "getpid"))},
      {"getpid_default", where(dlsym(RTLD_DEFAULT, "getpid"))},
      // Exact names only: a prefix or suffix of a hooked name is not hooked.
      {"cuLaunchKernel_ptszX", where(dlsym(handle, "cuLaunchKernel_ptszX"))},
      {"cuMemAlloc", where(dlsym(handle, "cuMemAlloc"))},
      {"cuGpushareNoSuchSymbol", where(dlsym(handle, "cuGpushareNoSuchSymbol"))}};
  return print_result(result);
}
