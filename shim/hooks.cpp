// Resolution of the real driver entry points, and the mapping real pointer -> our wrapper that
// both dlsym and cuGetProcAddress use.
#include "hooks.h"

#include <dlfcn.h>

#include <cstring>

#include "dlsym.h"

namespace gpushare::shim {

std::atomic<void*> g_real[kHookCount];
std::atomic<bool> g_resolved[2];

namespace {
constexpr const char* kLibraryFile[] = {"libcuda.so.1", "libnvidia-ml.so.1"};
}

size_t find_hook(std::string_view name) {
  for (size_t i = 0; i < kHookCount; ++i)
    if (name == kHooks[i].name) return i;
  return kHookCount;
}

void* library_handle(Library lib, bool load) {
  const char* file = kLibraryFile[static_cast<int>(lib)];
  void* handle = dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
  if (!handle && load) handle = dlopen(file, RTLD_LAZY);
  return handle;  // never closed: the real entry points must stay valid
}

// No lock is held here: dlopen takes the loader lock, and a thread holding the loader lock (a
// library constructor) may call dlsym, which lands in our override and resolves too. Threads that
// race simply store the same values.
bool resolve_library(Library lib) {
  int l = static_cast<int>(lib);
  if (g_resolved[l].load(std::memory_order_acquire)) return true;
  void* handle = library_handle(lib, /*load=*/true);
  if (!handle) return false;
  for (size_t i = 0; i < kHookCount; ++i)
    if (kHooks[i].library == lib)
      g_real[i].store(real_dlsym()(handle, kHooks[i].name), std::memory_order_relaxed);
  g_resolved[l].store(true, std::memory_order_release);
  return true;
}

void* wrapper_for_real(void* real_pointer) {
  if (!real_pointer) return nullptr;
  for (size_t i = 0; i < kHookCount; ++i) {
    if (!g_resolved[static_cast<int>(kHooks[i].library)].load(std::memory_order_acquire)) continue;
    if (g_real[i].load(std::memory_order_relaxed) == real_pointer) return g_wrapper[i];
  }
  return nullptr;
}

bool is_wrapper(void* pointer) {
  for (size_t i = 0; i < kHookCount; ++i)
    if (g_wrapper[i] == pointer) return true;
  return false;
}

}  // namespace gpushare::shim
