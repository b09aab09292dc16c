// Linked with -lcuda: every entry point is bound by the dynamic linker by its exported name
// (cuMemAlloc_v2, cuLaunchKernel_ptsz, ...), the way programs built against cuda.h call it.
#include <CLI/CLI.hpp>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

namespace {
// Asks cuGetProcAddress_v2 and cuGetProcAddress, called by name, for one hooked symbol.
nlohmann::json probe_proc_address(const char* base) {
  nlohmann::json out;
  void* p2 = nullptr;
  CUdriverProcAddressQueryResult status{};
  CUresult r2 = cuGetProcAddress_v2(base, &p2, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  out["v2"] = {
      {"result", r2}, {"status", status}, {"symbol", symbol_of(p2)}, {"object", object_of(p2)}};
  void* p1 = nullptr;
  CUresult r1 = cuGetProcAddress(base, &p1, 11080, CU_GET_PROC_ADDRESS_DEFAULT);
  out["v1"] = {{"result", r1}, {"symbol", symbol_of(p1)}, {"object", object_of(p1)}};
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"driver client linked with -lcuda"};
  ExerciseOptions options;
  add_exercise_options(app, options);
  CLI11_PARSE(app, argc, argv);

  DriverApi api;
#define CLIENT_LINK(field, base, exact, pt) api.field = options.per_thread ? &::pt : &::exact;
  CLIENT_DRIVER_API(CLIENT_LINK)
#undef CLIENT_LINK
  nlohmann::json result = run_exercise(api, options);
  result["client"] = "linked";
  result["probe"] = probe_proc_address("cuMemAlloc");
  return print_result(result);
}
