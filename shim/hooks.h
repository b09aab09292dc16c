// The Hook enum, names and families, all generated from hook_table.h, and the table of real
// driver entry points that the wrappers call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cuda_api.h"
#include "hook_table.h"

namespace gpushare::shim {

enum class Family : uint8_t {
  init,
  launch,
  launch_multi,
  graph_launch,
  capture_begin,
  capture_end,
  alloc,
  dealloc,
  mem_info,
  proc_address,
  nvml_mem_info
};
enum class Library : uint8_t { cuda, nvml };

#define GPUSHARE_X(family, lib, name, ret, params, args) name,
enum class Hook : uint16_t { GPUSHARE_HOOKS(GPUSHARE_X) };
#undef GPUSHARE_X

#define GPUSHARE_X(...) +1
inline constexpr size_t kHookCount = 0 GPUSHARE_HOOKS(GPUSHARE_X);
#undef GPUSHARE_X

struct HookInfo {
  const char* name;
  Family family;
  Library library;
};

#define GPUSHARE_X(family, lib, name, ret, params, args) \
  HookInfo{#name, Family::family, Library::lib},
inline constexpr HookInfo kHooks[] = {GPUSHARE_HOOKS(GPUSHARE_X)};
#undef GPUSHARE_X
static_assert(sizeof(kHooks) / sizeof(kHooks[0]) == kHookCount, "hook table and enum disagree");

constexpr size_t index(Hook h) { return static_cast<size_t>(h); }
constexpr const HookInfo& info(Hook h) { return kHooks[index(h)]; }

// The typed signature of each hooked symbol.
template <Hook H>
struct Signature;
#define GPUSHARE_X(family, lib, name, ret, params, args) \
  template <>                                            \
  struct Signature<Hook::name> {                         \
    using Fn = ret(*) params;                            \
  };
GPUSHARE_HOOKS(GPUSHARE_X)
#undef GPUSHARE_X

// Looks a name up in the table (exact match only: a prefix match also catches cuDNN and cuBLAS
// symbols and recursed into SIGSEGV in HAMi-core). Returns kHookCount when not hooked.
size_t find_hook(std::string_view name);

// Real entry points, resolved once from the loaded libcuda.so.1 / libnvidia-ml.so.1.
// g_real[i] is written before g_resolved[library] is released, then never again.
extern std::atomic<void*> g_real[kHookCount];
extern void* const g_wrapper[kHookCount];
extern std::atomic<bool> g_resolved[2];

// The library's handle: NOLOAD first; with load=true it loads the library when absent.
void* library_handle(Library lib, bool load);

// Resolves the library's real entry points (dlopen of an already loaded library, or loading it
// on a program's first CUDA call). Returns false when the library cannot be found.
bool resolve_library(Library lib);

template <Hook H>
inline typename Signature<H>::Fn real() {
  constexpr auto lib = info(H).library;
  if (!g_resolved[static_cast<int>(lib)].load(std::memory_order_acquire)) [[unlikely]] {
    if (!resolve_library(lib)) return nullptr;
  }
  return reinterpret_cast<typename Signature<H>::Fn>(
      g_real[index(H)].load(std::memory_order_relaxed));
}

// The wrapper for a real pointer returned by the driver (cuGetProcAddress) or by dlsym: compares
// the pointer with the real addresses of every hooked symbol, so ABI versions (_v2) and
// per-thread-stream variants (_ptsz) stay intact. Returns nullptr when it is no hooked symbol.
void* wrapper_for_real(void* real_pointer);
bool is_wrapper(void* pointer);
}  // namespace gpushare::shim
