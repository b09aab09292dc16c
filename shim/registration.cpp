// Registration (docs/protocol.md): connect, ask for the job's class, map the control block the
// daemon sends (only once checked: control_block_check.h), put it in force, then tell the daemon
// what it needs to know of a job that may have run before it: where the job's devices are, the
// allocations already live, and the size of each device. Runs under the link's lock, from the
// first cuInit or the background thread, never on the launch path.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "accounting.h"
#include "control_block_check.h"
#include "daemon_link.h"
#include "daemon_link_state.h"
#include "daemon_socket.h"
#include "gate.h"
#include "gpushare/protocol/device_uuid.h"
#include "log.h"
#include "memory_swap.h"
#include "visible_devices.h"

namespace gpushare::shim {
namespace {

using protocol::ControlBlock;
using protocol::MessageType;

const char* devices_without_placement() {
  return g_link.settings.numeric_devices.count ? "as CUDA_VISIBLE_DEVICES lists them"
                                               : "not known (registered for any device)";
}

// Right after registering: asks the daemon which physical device each ordinal's UUID is, and puts
// its answer in force (declarations and views use it). A UUID the daemon cannot place leaves the
// numeric CUDA_VISIBLE_DEVICES list, or "any device", in force, with one warning per process.
// False when the link broke.
bool place_devices(int fd) {
  LinkSettings& s = g_link.settings;
  const protocol::DeviceUuids& uuids = s.uuids;
  if (uuids.count == 0) return true;  // the driver could not tell: as CUDA_VISIBLE_DEVICES says
  protocol::DeviceMap map{};
  if (!send_message(fd, MessageType::device_uuids, &uuids, sizeof uuids) ||
      !receive_reply(fd, MessageType::device_map, &map, sizeof map, nullptr, nullptr, 0)) {
    // A daemon from before device_uuids drops the connection: the next registration does
    // without it rather than loop.
    s.uuids.count = 0;
    log_warning("gpushared did not place this job's devices (an older daemon?): they are %s",
                devices_without_placement());
    return false;
  }
  int unplaced = -1;
  set_device_table(resolved_devices(map, uuids.count, s.numeric_devices, &unplaced));
  if (unplaced >= 0 && !s.warned_unplaced) {
    s.warned_unplaced = true;
    protocol::DeviceUuid uuid;
    std::memcpy(uuid.data(), uuids.uuids[unplaced], uuid.size());
    char text[protocol::kDeviceUuidTextSize];
    protocol::format_device_uuid(uuid, text);
    log_warning("gpushared does not know device %s (CUDA ordinal %d): this job's devices are %s",
                text, unplaced, devices_without_placement());
  }
  return true;
}

// The control block of a successful reply, mapped, or nullptr with `reason` filled in. The memfd
// is the caller's to close.
ControlBlock* map_control_block(const protocol::RegisterReply& reply, int memfd, char* reason,
                                size_t reason_size) {
  // The daemon's refusal, or what is wrong with the control block it sent (never mapped unless
  // sealed and of the right size: control_block_check.h).
  const char* problem = nullptr;
  void* page = MAP_FAILED;
  if (reply.status != static_cast<uint32_t>(protocol::RegisterStatus::ok))
    std::snprintf(reason, reason_size, "registration refused: %s", reply.message);
  else if ((problem = control_block_problem(memfd)))
    std::snprintf(reason, reason_size, "registration failed: %s", problem);
  else if ((page = mmap(nullptr, protocol::kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED,
                        memfd, 0)) == MAP_FAILED)
    std::snprintf(reason, reason_size, "registration failed: cannot map the control block: %s",
                  std::strerror(errno));
  if (page == MAP_FAILED) return nullptr;
  auto* block = static_cast<ControlBlock*>(page);
  if (block->magic != protocol::kControlBlockMagic ||
      block->version != protocol::kControlBlockVersion || block->job_id != reply.job_id) {
    std::snprintf(reason, reason_size,
                  "registration failed: the control block is not this job's (magic, version or "
                  "job id)");
    munmap(page, protocol::kControlBlockSize);
    return nullptr;
  }
  return block;
}

// Allocations made before registration are in the snapshot; later ones are declared by their own
// call, which waits for the link's lock (a duplicate simply replaces the first on the daemon's
// side). False when the link broke.
bool redeclare_live_allocations(int fd) {
  std::vector<Allocation> live;
  for_each_live_allocation([&](const Allocation& a) { live.push_back(a); });
  for (const Allocation& a : live) {
    bool admitted;
    uint32_t flags = static_cast<uint32_t>(protocol::MemDeclareFlags::redeclared);
    if (a.kind == AllocKind::managed)
      flags |= static_cast<uint32_t>(protocol::MemDeclareFlags::swappable);
    if (!declare_locked(fd, a, flags, 0, &admitted)) return false;
  }
  if (!live.empty()) say("re-declared %zu live allocations", live.size());
  return true;
}

}  // namespace

bool connect_and_register(const char** why) {
  static char reason[protocol::kMessageSize + 64];
  const LinkSettings& s = g_link.settings;
  int fd = connect_daemon(s.socket_path, kIoTimeoutMs, why);
  if (fd < 0) return false;
  protocol::RegisterRequest request{};
  request.requested_class = static_cast<uint32_t>(s.production ? protocol::JobClass::production
                                                               : protocol::JobClass::opportunistic);
  request.client_pid = static_cast<uint32_t>(getpid());
  request.device_count = s.numeric_devices.count;
  std::memcpy(request.devices, s.numeric_devices.physical, sizeof request.devices);
  protocol::copy_text(request.job_name, s.job_name);
  protocol::RegisterReply reply{};
  int memfd = -1;
  char error[protocol::kMessageSize] = "";
  if (!send_message(fd, MessageType::register_request, &request, sizeof request) ||
      !receive_reply(fd, MessageType::register_reply, &reply, sizeof reply, &memfd, error,
                     sizeof error)) {
    std::snprintf(reason, sizeof reason, "no valid registration reply%s%s", *error ? ": " : "",
                  error);
    *why = reason;
    ::close(fd);
    return false;
  }
  reply.message[sizeof reply.message - 1] = '\0';
  ControlBlock* block = map_control_block(reply, memfd, reason, sizeof reason);
  if (memfd >= 0) ::close(memfd);
  if (!block) {
    *why = reason;
    ::close(fd);
    return false;
  }
  g_link.socket_inode.store(socket_inode(fd));
  g_link.fd.store(fd);
  set_control_block(block);
  if (reply.granted_class != request.requested_class) log_warning("%s", reply.message);
  say("registered with gpushared as job %llu (%s)", static_cast<unsigned long long>(reply.job_id),
      reply.granted_class == 0 ? "production" : "opportunistic");

  if (!place_devices(fd)) {
    break_link(fd);
    return true;  // registered; the background thread notices the broken link and retries
  }
  if (!redeclare_live_allocations(fd)) break_link(fd);
  // The physical size of each visible device: the default capacity derives from it.
  uint64_t totals[protocol::kMaxDevices];
  int devices = device_totals(totals, static_cast<int>(protocol::kMaxDevices));
  for (int i = 0; i < devices && g_link.fd.load() == fd; ++i) {
    protocol::DeviceInfo info{physical_device(i), 0, totals[i]};
    if (!send_message(fd, MessageType::device_info, &info, sizeof info)) break_link(fd);
  }
  return true;
}

}  // namespace gpushare::shim
