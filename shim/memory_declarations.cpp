// Allocations declared to the daemon (docs/memory.md): a reservation before the allocation and
// its commit after, releases, and the allocation sites' descriptions. Every call fails open: with
// no daemon, a broken link or no answer in time, the allocation goes ahead as without gpushare.
#include <cerrno>

#include "accounting.h"
#include "daemon_link.h"
#include "daemon_link_state.h"
#include "daemon_socket.h"
#include "visible_devices.h"

namespace gpushare::shim {
namespace {

using protocol::MessageType;

// The reply to a memory declaration: the daemon may first move other jobs' memory to host (it
// bounds that by memory.swap_timeout_ms, at most 8 s; docs/memory.md).
constexpr int kAdmissionTimeoutMs = 10000;

}  // namespace

bool declare_locked(int fd, const Allocation& a, uint32_t flags, uint32_t site, bool* admitted) {
  protocol::MemDeclare m{
      a.handle, a.bytes, physical_device(a.device), static_cast<uint32_t>(a.kind), flags, site};
  protocol::MemReply r{};
  if (!send_message(fd, MessageType::mem_declare, &m, sizeof m)) return false;
  if (!wait_for_reply(fd, kAdmissionTimeoutMs) ||
      !receive_reply(fd, MessageType::mem_reply, &r, sizeof r, nullptr, nullptr, 0))
    return false;
  *admitted = r.status == static_cast<uint32_t>(protocol::MemStatus::admitted);
  return true;
}

void daemon_link_announce_site(uint32_t site, const char* text) {
  if (g_link.fd.load(std::memory_order_relaxed) < 0) return;
  LinkLock lock;
  int fd = g_link.fd.load();
  if (fd < 0) return;
  if (!still_ours(fd)) return break_link(fd);
  protocol::AllocSite m{site, 0, {}};
  protocol::copy_text(m.text, text);
  if (!send_message(fd, MessageType::alloc_site, &m, sizeof m)) break_link(fd);
}

bool daemon_link_declare(uint64_t handle, uint64_t bytes, int device, AllocKind kind,
                         uint32_t flags, uint32_t site) {
  if (g_link.fd.load(std::memory_order_relaxed) < 0) return true;  // pass-through: fail open
  LinkLock lock;
  int fd = g_link.fd.load();
  if (fd < 0) return true;
  if (!still_ours(fd)) return break_link(fd), true;
  bool admitted = true;
  if (!declare_locked(fd, Allocation{handle, bytes, device, kind}, flags, site, &admitted)) {
    break_link(fd);
    return true;
  }
  return admitted;
}

void daemon_link_declare_free(uint64_t handle, int device) {
  if (g_link.fd.load(std::memory_order_relaxed) < 0) return;
  LinkLock lock;
  int fd = g_link.fd.load();
  if (fd < 0) return;
  if (!still_ours(fd)) return break_link(fd);
  protocol::MemRelease m{handle, physical_device(device), 0};
  if (!send_message(fd, MessageType::mem_release, &m, sizeof m)) break_link(fd);
}

}  // namespace gpushare::shim
