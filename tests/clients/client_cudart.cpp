// Resolves the driver the way libcudart does (dlopen, dlsym("cuGetProcAddress_v2"), self-lookup
// of "cuGetProcAddress", everything else through the pointer it returned) and runs the exercise.
#include <CLI/CLI.hpp>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

int main(int argc, char** argv) {
  CLI::App app{"cudart-style driver client"};
  ExerciseOptions options;
  add_exercise_options(app, options);
  int cuda_version = CUDA_VERSION;
  app.add_option("--cuda-version", cuda_version, "cudaVersion passed to cuGetProcAddress");
  CLI11_PARSE(app, argc, argv);

  DriverApi api;
  CudartResolution resolution = resolve_cudart_style(api, cuda_version, options.per_thread);
  if (!resolution.error.empty()) return print_result({{"error", resolution.error}});
  nlohmann::json result = run_exercise(api, options);
  result["client"] = "cudart";
  result["proc_address"] = {{"v2", resolution.proc_address_calls_v2},
                            {"v1", resolution.proc_address_calls_v1},
                            {"not_found", resolution.failed_lookups}};
  return print_result(result);
}
