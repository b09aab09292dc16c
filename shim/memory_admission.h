// Every allocation is declared to the daemon BEFORE it is made (docs/memory.md): a reservation
// under a token, answered admitted or refused (the call then fails with
// CUDA_ERROR_OUT_OF_MEMORY, as the driver would); once made, the allocation is committed under
// its real handle and the token released; a failed allocation releases the token. Without a
// daemon everything is admitted (fail-open).
#pragma once

#include <cstdint>

#include "accounting.h"

namespace gpushare::shim {

struct Reservation {
  uint64_t token = 0;
  int device = 0;  // CUDA ordinal
  bool admitted = true;
  uint32_t site = 0;  // GPUSHARE_TRACE_ALLOC's call-site id, 0 when not traced
};

Reservation reserve_memory(uint64_t bytes, int device, AllocKind kind, bool swappable);
// Declares the allocation under its handle, releases the token, and hands managed memory to the
// swap thread.
void commit_memory(const Reservation& r, const Allocation& a);
void cancel_memory(const Reservation& r);

}  // namespace gpushare::shim
