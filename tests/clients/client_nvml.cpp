// Reads device memory through NVML (dlopen of libnvidia-ml.so.1, as nvidia-smi and
// torch.cuda.mem_get_info's NVML path do), with both memory-info calls.
#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cuda_api.h"

namespace {
template <class F>
F resolve(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}
int fail(const std::string& why) {
  std::cout << nlohmann::json{{"error", why}}.dump() << std::endl;
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"NVML memory reader"};
  int calls = 1;
  app.add_option("--calls", calls, "calls of each memory-info function");
  CLI11_PARSE(app, argc, argv);

  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (lib == nullptr) return fail("dlopen libnvidia-ml.so.1 failed");
  auto init = resolve<nvmlReturn_t (*)()>(lib, "nvmlInit_v2");
  auto shutdown = resolve<nvmlReturn_t (*)()>(lib, "nvmlShutdown");
  auto count = resolve<nvmlReturn_t (*)(unsigned*)>(lib, "nvmlDeviceGetCount_v2");
  auto handle =
      resolve<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  auto info =
      resolve<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(lib, "nvmlDeviceGetMemoryInfo");
  auto info_v2 =
      resolve<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(lib, "nvmlDeviceGetMemoryInfo_v2");
  if (!init || !shutdown || !count || !handle || !info || !info_v2) return fail("missing symbol");

  unsigned devices = 0;
  nvmlDevice_t device = nullptr;
  if (init() != kNvmlSuccess || count(&devices) != kNvmlSuccess || devices == 0 ||
      handle(0, &device) != kNvmlSuccess) {
    return fail("NVML setup failed");
  }
  nvmlMemory_t m{};
  nvmlMemory_v2_t m2{};
  for (int i = 0; i < calls; ++i) {
    m2.version = sizeof(nvmlMemory_v2_t) | (2u << 24);  // NVML_STRUCT_VERSION(Memory, 2)
    if (info(device, &m) != kNvmlSuccess || info_v2(device, &m2) != kNvmlSuccess) {
      return fail("memory info failed");
    }
  }
  shutdown();
  std::cout << nlohmann::json{{"client", "nvml"},
                              {"devices", devices},
                              {"memory", {{"total", m.total}, {"free", m.free}, {"used", m.used}}},
                              {"memory_v2",
                               {{"total", m2.total},
                                {"free", m2.free},
                                {"used", m2.used},
                                {"reserved", m2.reserved}}}}
                   .dump()
            << std::endl;
  return 0;
}
