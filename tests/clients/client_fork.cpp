// fork after (or before) CUDA initialisation: the parent launches and allocates, forks, the
// child launches and allocates on its own and exits normally, the parent goes on and waits.
// Each process's shim must count only its own work (the child writes <report>.<pid>).
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "driver_api.h"
#include "exercise.h"

using namespace gpushare::clients;

namespace {
struct Cuda {
  DriverApi api;
  CUfunction kernel = nullptr;
};

bool setup(Cuda& c) {
  if (!resolve_cudart_style(c.api, CUDA_VERSION, false).error.empty()) return false;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  static const char kImage[] = "gpushare fake module";
  return c.api.init(0) == CUDA_SUCCESS && c.api.primary_ctx_retain(&ctx, 0) == CUDA_SUCCESS &&
         c.api.ctx_set_current(ctx) == CUDA_SUCCESS &&
         c.api.module_load_data(&module, kImage) == CUDA_SUCCESS &&
         c.api.module_get_function(&c.kernel, module, "noop") == CUDA_SUCCESS;
}

// Launches n kernels and allocates (and keeps) `bytes` unless 0; false on any failure.
bool work(const Cuda& c, int n, uint64_t bytes) {
  for (int i = 0; i < n; ++i) {
    if (c.api.launch_kernel(c.kernel, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) !=
        CUDA_SUCCESS) {
      return false;
    }
  }
  CUdeviceptr p = 0;
  return bytes == 0 || c.api.mem_alloc(&p, bytes) == CUDA_SUCCESS;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fork after CUDA initialisation"};
  int before = 10, child_launches = 7, after = 5;
  bool fork_before_init = false;
  app.add_option("--before", before, "parent launches before fork");
  app.add_option("--child", child_launches, "child launches");
  app.add_option("--after", after, "parent launches after fork");
  app.add_flag("--fork-before-init", fork_before_init, "fork before any CUDA call");
  CLI11_PARSE(app, argc, argv);
  constexpr uint64_t kParentBytes = 1 << 20, kChildBytes = 2 << 20;

  Cuda cuda;
  if (!fork_before_init && (!setup(cuda) || !work(cuda, before, kParentBytes))) {
    return print_result({{"error", "parent work before fork failed"}});
  }
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) return print_result({{"error", "fork failed"}});
  if (child == 0) {
    if (fork_before_init && !setup(cuda)) std::exit(3);
    std::exit(work(cuda, child_launches, kChildBytes) ? 0 : 4);  // exit(): the report is written
  }
  bool ok = fork_before_init ? setup(cuda) && work(cuda, before + after, kParentBytes)
                             : work(cuda, after, 0);
  int status = 0;
  waitpid(child, &status, 0);
  nlohmann::json result = {{"client", "fork"},
                           {"child_pid", child},
                           {"child_exit", WIFEXITED(status) ? WEXITSTATUS(status) : -1}};
  if (!ok) result["error"] = "parent work after fork failed";
  return print_result(result);
}
