#include "memory_admission.h"

#include <atomic>

#include "daemon_link.h"
#include "gpushare/protocol/wire.h"
#include "memory_sites.h"
#include "memory_swap.h"

namespace gpushare::shim {
namespace {

using protocol::MemDeclareFlags;

std::atomic<uint64_t> g_next_token{1};

uint32_t flag(MemDeclareFlags f) {
  return static_cast<uint32_t>(f);
}

}  // namespace

Reservation reserve_memory(uint64_t bytes, int device, AllocKind kind, bool swappable) {
  Reservation r;
  r.device = device;
  r.token = protocol::kReservationTokenBit | g_next_token.fetch_add(1, std::memory_order_relaxed);
  r.site = allocation_site();
  uint32_t flags =
      flag(MemDeclareFlags::reservation) | (swappable ? flag(MemDeclareFlags::swappable) : 0);
  r.admitted = daemon_link_declare(r.token, bytes, device, kind, flags, r.site);
  return r;
}

void commit_memory(const Reservation& r, const Allocation& a) {
  bool swappable = a.kind == AllocKind::managed;
  if (swappable) track_swappable(a.handle, a.bytes, a.device);
  uint32_t flags =
      flag(MemDeclareFlags::committed) | (swappable ? flag(MemDeclareFlags::swappable) : 0);
  daemon_link_declare(a.handle, a.bytes, a.device, a.kind, flags, r.site);
  daemon_link_declare_free(r.token, r.device);
}

void cancel_memory(const Reservation& r) {
  daemon_link_declare_free(r.token, r.device);
}

}  // namespace gpushare::shim
