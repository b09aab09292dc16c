// The exported wrappers, one per line of hook_table.h. Each forwards to its family (families.h).
#include "families.h"

#define GPUSHARE_EXPAND(...) __VA_ARGS__
#define GPUSHARE_X(family, lib, name, ret, params, args)                      \
  extern "C" __attribute__((visibility("default"))) ret name params {        \
    return gpushare::shim::family<gpushare::shim::Hook::name>(GPUSHARE_EXPAND args); \
  }
GPUSHARE_HOOKS(GPUSHARE_X)
#undef GPUSHARE_X

namespace gpushare::shim {
#define GPUSHARE_X(family, lib, name, ret, params, args) reinterpret_cast<void*>(&::name),
void* const g_wrapper[kHookCount] = {GPUSHARE_HOOKS(GPUSHARE_X)};
#undef GPUSHARE_X
}  // namespace gpushare::shim
