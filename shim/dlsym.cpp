// The dlsym override: the interception point for programs that look driver symbols up by name
// (torch's driver wrapper, cuBLAS, NVRTC paths). Rules from DESIGN.md §1:
// - the real dlsym comes from dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"), else "GLIBC_2.2.5";
//   never __libc_dlsym / _dl_sym;
// - exact names from the hook table only; the caller's handle is kept;
// - nothing is initialised here beyond what an already loaded library provides (RTLD_NOLOAD):
//   dlsym may be called under the loader lock.
#include "dlsym.h"

#include <dlfcn.h>

#include <atomic>

#include "accounting.h"
#include "hooks.h"

// Under ASan the sanitizer's own start-up resolves its interceptors through dlsym before it has
// mapped its shadow memory, so an instrumented dlsym override faults on its first read of `name`
// (found with scripts/test-sanitizers.sh). TSan's start-up does the same before its thread state
// exists, and the function-entry hook of an instrumented override faults there. The two functions
// on that path stay uninstrumented by either.
#define GPUSHARE_NO_ASAN __attribute__((no_sanitize_address, no_sanitize_thread))

namespace gpushare::shim {

// Atomic builtins, not std::atomic: its inlined members keep their own instrumentation.
GPUSHARE_NO_ASAN DlsymFn real_dlsym() {
  static DlsymFn real = nullptr;
  DlsymFn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
  if (fn) [[likely]] return fn;
  fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!fn) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
  return fn;
}

namespace {

void* hooked_dlsym(void* handle, const char* name, size_t hook) {
  void* found = real_dlsym()(handle, name);
  if (!found) return nullptr;
  Library lib = kHooks[hook].library;
  if (found == g_wrapper[hook]) {
    // RTLD_DEFAULT (or a handle of ours) found our own export. Without the shim the program
    // would get the driver's symbol, or nothing when no driver is loaded: keep that answer.
    void* library = library_handle(lib, /*load=*/false);
    if (!library || !real_dlsym()(library, name)) return nullptr;
    count_dlsym_substitution();
    return found;
  }
  if (!g_resolved[static_cast<int>(lib)].load(std::memory_order_acquire)) {
    // Only resolve from an already loaded library (no loading under a possible loader lock).
    if (!library_handle(lib, /*load=*/false) || !resolve_library(lib)) return found;
  }
  if (found == g_real[hook].load(std::memory_order_relaxed)) {
    count_dlsym_substitution();
    return g_wrapper[hook];
  }
  return found;  // same name in another library: not the driver's, not ours to hook
}

}  // namespace
}  // namespace gpushare::shim

using gpushare::shim::find_hook;
using gpushare::shim::kHookCount;

// Exported as dlsym@@GLIBC_2.34 and dlsym@GLIBC_2.2.5 (see exports.map). The pass-through is a
// tail call, so glibc's dlsym sees the caller's return address and RTLD_NEXT keeps meaning "after
// the caller" (tests/interception checks it).
extern "C" __attribute__((visibility("default"))) GPUSHARE_NO_ASAN void* gpushare_dlsym(
    void* handle, const char* name) {
  if (name && ((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v'))) {
    size_t hook = find_hook(name);
    if (hook < kHookCount) return gpushare::shim::hooked_dlsym(handle, name, hook);
  }
  return gpushare::shim::real_dlsym()(handle, name);
}
__asm__(".symver gpushare_dlsym, dlsym@@GLIBC_2.34");
__asm__(".symver gpushare_dlsym_old, dlsym@GLIBC_2.2.5");
extern "C" __attribute__((visibility("default"), alias("gpushare_dlsym"))) void* gpushare_dlsym_old(
    void* handle, const char* name);
