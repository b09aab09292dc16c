// GPUSHARE_TRACE_ALLOC=1: where allocations come from (docs/memory.md). Each allocation call's
// stack (outside the shim) is hashed to a site id; the first allocation from a site announces it
// to the daemon with a readable description, so `gpusharectl jobs --memory` can show which sites
// hold how much.
//
// The stack is taken with glibc's backtrace(), not libunwind: Debian's static libunwind.a calls
// into liblzma (MiniDebugInfo) and exports its own _Unwind_* beside the static libgcc unwinder the
// shim already links; taking in two more static archives for a debugging aid was not worth the
// risk to the "nothing beyond glibc" rule (DESIGN.md §1). backtrace() needs nothing new.
#pragma once

#include <cstdint>

namespace gpushare::shim {

// The calling allocation's site id, or 0 when tracing is off.
uint32_t allocation_site();

}  // namespace gpushare::shim
