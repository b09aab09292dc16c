// The shim's side of the link to gpushared (docs/protocol.md): registration, the control block,
// memory declarations, and a background thread that notices a lost daemon and reconnects.
//
// This runs inside any host program, so: no exceptions, no logging library, every socket
// operation bounded by a timeout, and nothing here may block a launch. State that the background
// thread touches is trivially destructible, so the thread is harmless during exit().
#include "gpushare/protocol/framing.h"
#include "gpushare/protocol/futex.h"
#include "daemon_link.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "accounting.h"
#include "background_thread.h"
#include "control_block_check.h"
#include "gpushare/protocol/wire.h"
#include "log.h"
#include "memory_swap.h"
#include "settings.h"

namespace gpushare::shim {
namespace {

using protocol::ControlBlock;
using protocol::MessageType;

constexpr int kIoTimeoutMs = 2000;    // any single send/receive/connect with the daemon
constexpr int kRetryPeriodMs = 1000;  // reconnect attempts while the daemon is away
// The MPS question holds up the program's first cuInit: a daemon that does not answer within this
// costs the program this much once, then it runs without MPS.
constexpr int kMpsQueryTimeoutMs = 1000;
// The reply to a memory declaration: the daemon may first move other jobs' memory to host (it
// bounds that by memory.swap_timeout_ms, at most 8 s; docs/memory.md).
constexpr int kAdmissionTimeoutMs = 10000;

// What daemon_link_start copied out of Settings: plain data the background thread can read at
// any time, even while exit() destroys the Settings object.
struct LinkSettings {
  char socket_path[sizeof(sockaddr_un::sun_path)];
  char job_name[protocol::kJobNameSize];
  bool production;
  bool quiet;
  uint32_t device_count;                   // from CUDA_VISIBLE_DEVICES; 0: any device
  int32_t devices[protocol::kMaxDevices];  // physical index of each CUDA ordinal
};

LinkSettings g_settings;
// Serialises every request/reply on the socket and every (re)connection.
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_fd{-1};  // the registered connection, or -1 (pass-through)
std::atomic<bool> g_started{false};
std::atomic<bool> g_thread_running{false};
bool g_warned_unreachable = false;  // under g_mutex: one warning while the daemon stays away
// Identity of our socket. A host program may close descriptors it does not own (daemonising code
// closes 3..N) and reuse the number: before any operation on g_fd the link checks it still is
// its own socket, so it never sends to, shuts down or closes a descriptor of the host.
std::atomic<uint64_t> g_socket_inode{0};

uint64_t inode_of(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool still_ours(int fd) {
  return fd >= 0 && inode_of(fd) == g_socket_inode.load();
}

struct Lock {
  Lock() { pthread_mutex_lock(&g_mutex); }
  ~Lock() { pthread_mutex_unlock(&g_mutex); }
};

// An informational line, written the way log.cpp writes (one write(2)), without settings().
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
void say(const char* format, ...) {
  if (g_settings.quiet) return;
  char line[512];
  int n = std::snprintf(line, sizeof line, "gpushare[%d]: ", static_cast<int>(getpid()));
  va_list args;
  va_start(args, format);
  int m = std::vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  if (n < 0 || m < 0) return;
  size_t len = std::min(static_cast<size_t>(n + m), sizeof line - 2);
  line[len++] = '\n';
  ssize_t written = ::write(STDERR_FILENO, line, len);
  (void)written;
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int physical_device(int ordinal) {
  if (ordinal >= 0 && static_cast<uint32_t>(ordinal) < g_settings.device_count)
    return g_settings.devices[ordinal];
  return ordinal;
}

// CUDA_VISIBLE_DEVICES="2,3" makes ordinal 0 physical device 2. UUID or MIG forms are not
// resolved here: the job is then registered for "any device".
void read_visible_devices() {
  g_settings.device_count = 0;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || !*visible) return;
  const char* p = visible;
  while (*p && g_settings.device_count < protocol::kMaxDevices) {
    char* end = nullptr;
    long index = std::strtol(p, &end, 10);
    if (end == p || index < 0 || index > protocol::kMaxDeviceIndex || (*end && *end != ',')) {
      g_settings.device_count = 0;
      return;
    }
    g_settings.devices[g_settings.device_count++] = static_cast<int32_t>(index);
    p = *end ? end + 1 : end;
  }
}

int connect_daemon(const char* socket_path, int timeout_ms, const char** why) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return *why = std::strerror(errno), -1;
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);  // also bounds connect()
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    *why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_message(int fd, MessageType type, const void* payload, size_t length) {
  return protocol::send_frame(fd, type, payload, length) == protocol::SendResult::sent;
}

// Receives one frame of type `type` into `payload` (exactly `length` bytes). A passed descriptor
// lands in *passed_fd when asked for, else is closed. Returns false on timeout, EOF or a bad frame.
bool receive_reply(int fd, MessageType type, void* payload, size_t length, int* passed_fd,
                   char* error_text, size_t error_size) {
  // The largest reply the shim expects, plus one byte so a longer frame shows as a size error.
  unsigned char frame[sizeof(protocol::FrameHeader) +
                      std::max(sizeof(protocol::RegisterReply), sizeof(protocol::MpsReply)) + 1];
  protocol::Received r = protocol::receive_frame(fd, frame, sizeof frame);
  const ssize_t n = r.bytes;
  int received_fd = r.take_first_fd();
  if (!passed_fd && received_fd >= 0) {
    ::close(received_fd);
    received_fd = -1;
  }
  protocol::FrameHeader h{};
  bool ok = n > 0 && !r.truncated &&
            protocol::check_frame(frame, static_cast<size_t>(n), &h) == protocol::FrameError::none;
  if (ok && h.type == static_cast<uint16_t>(MessageType::error) && error_text) {
    protocol::ErrorReply e;
    std::memcpy(&e, frame + sizeof h, sizeof e);
    std::snprintf(error_text, error_size, "%.*s", static_cast<int>(sizeof e.message), e.message);
  }
  if (!ok || h.type != static_cast<uint16_t>(type) || h.length != length) {
    if (received_fd >= 0) ::close(received_fd);
    return false;
  }
  std::memcpy(payload, frame + sizeof h, length);
  if (passed_fd) *passed_fd = received_fd;
  return true;
}

// Lets every launch through a block the daemon no longer serves, and wakes those asleep on it.
void open_gate(ControlBlock* block) {
  block->allowance.store(protocol::kUnlimited, std::memory_order_release);
  block->paused.store(0, std::memory_order_release);
  block->gate_seq.fetch_add(1, std::memory_order_acq_rel);
  protocol::futex_wake_all(&block->gate_seq);
}

// Back to pass-through: the local (open) block goes in force FIRST, so a dead daemon can never
// leave the program paused; then the old block's gate opens and its sleepers wake. The old block
// is never unmapped: a launch may still hold it.
void fall_back_to_local() {
  ControlBlock* old = control_block();
  set_control_block(local_control_block());
  if (old != local_control_block()) open_gate(old);
}

// Under g_mutex: the daemon is gone.
void lose_daemon(const char* why) {
  fall_back_to_local();
  int fd = g_fd.exchange(-1);
  if (still_ours(fd)) ::close(fd);  // else the host closed it already and may reuse the number
  g_warned_unreachable = true;      // this warning covers the retries that follow
  log_warning("lost gpushared (%s): running pass-through, reconnecting in the background", why);
}

// Under g_mutex, while connected: one MemDeclare round trip (flags: MemDeclareFlags bits). False
// when the link broke or the daemon did not answer in time.
bool declare_locked(int fd, const Allocation& a, uint32_t flags, uint32_t site, bool* admitted) {
  protocol::MemDeclare m{a.handle,
                         a.bytes,
                         physical_device(a.device),
                         static_cast<uint32_t>(a.kind),
                         flags,
                         site};
  protocol::MemReply r{};
  if (!send_message(fd, MessageType::mem_declare, &m, sizeof m)) return false;
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = poll(&p, 1, kAdmissionTimeoutMs);
  } while (n < 0 && errno == EINTR);
  if (n <= 0 || !receive_reply(fd, MessageType::mem_reply, &r, sizeof r, nullptr, nullptr, 0))
    return false;
  *admitted = r.status == static_cast<uint32_t>(protocol::MemStatus::admitted);
  return true;
}

// A request failed mid-way: stop using the socket now; the background thread notices the
// shutdown (POLLHUP), closes it and reconnects. The descriptor is not closed here, so the thread
// can never poll a number the host program has reused.
void break_link(int fd) {
  fall_back_to_local();
  if (still_ours(fd))
    shutdown(fd, SHUT_RDWR);
  else
    g_fd.store(-1);  // not ours any more: forget it, never touch it
}

// Under g_mutex: connect, register, map the control block, re-declare live allocations.
bool connect_and_register(const char** why) {
  static char reason[protocol::kMessageSize + 64];
  int fd = connect_daemon(g_settings.socket_path, kIoTimeoutMs, why);
  if (fd < 0) return false;
  protocol::RegisterRequest request{};
  request.requested_class = static_cast<uint32_t>(
      g_settings.production ? protocol::JobClass::production : protocol::JobClass::opportunistic);
  request.client_pid = static_cast<uint32_t>(getpid());
  request.device_count = g_settings.device_count;
  std::memcpy(request.devices, g_settings.devices, sizeof request.devices);
  protocol::copy_text(request.job_name, g_settings.job_name);
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
  // Why registration failed, when it did: the daemon's refusal, or what is wrong with the control
  // block it sent (never mapped unless sealed and of the right size: control_block_check.h).
  const char* problem = nullptr;
  void* page = MAP_FAILED;
  if (reply.status != static_cast<uint32_t>(protocol::RegisterStatus::ok))
    std::snprintf(reason, sizeof reason, "registration refused: %s", reply.message);
  else if ((problem = control_block_problem(memfd)))
    std::snprintf(reason, sizeof reason, "registration failed: %s", problem);
  else if ((page = mmap(nullptr, protocol::kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED,
                        memfd, 0)) == MAP_FAILED)
    std::snprintf(reason, sizeof reason, "registration failed: cannot map the control block: %s",
                  std::strerror(errno));
  if (memfd >= 0) ::close(memfd);
  auto* block = static_cast<ControlBlock*>(page);
  if (page != MAP_FAILED &&
      (block->magic != protocol::kControlBlockMagic ||
       block->version != protocol::kControlBlockVersion || block->job_id != reply.job_id))
    std::snprintf(reason, sizeof reason,
                  "registration failed: the control block is not this job's (magic, version or "
                  "job id)");
  if (page == MAP_FAILED || block->magic != protocol::kControlBlockMagic ||
      block->version != protocol::kControlBlockVersion || block->job_id != reply.job_id) {
    *why = reason;
    if (page != MAP_FAILED) munmap(page, protocol::kControlBlockSize);
    ::close(fd);
    return false;
  }
  g_socket_inode.store(inode_of(fd));
  g_fd.store(fd);
  set_control_block(block);
  if (reply.granted_class != request.requested_class) log_warning("%s", reply.message);
  say("registered with gpushared as job %llu (%s)", static_cast<unsigned long long>(reply.job_id),
      reply.granted_class == 0 ? "production" : "opportunistic");

  // Allocations made before this point are in the snapshot; later ones are declared by their own
  // call, which waits for g_mutex (a duplicate simply replaces the first on the daemon's side).
  std::vector<Allocation> live;
  for_each_live_allocation([&](const Allocation& a) { live.push_back(a); });
  for (const Allocation& a : live) {
    bool admitted;
    uint32_t flags = static_cast<uint32_t>(protocol::MemDeclareFlags::redeclared);
    if (a.kind == AllocKind::managed)
      flags |= static_cast<uint32_t>(protocol::MemDeclareFlags::swappable);
    if (!declare_locked(fd, a, flags, 0, &admitted)) {
      break_link(fd);
      break;
    }
  }
  if (!live.empty()) say("re-declared %zu live allocations", live.size());
  // The physical size of each visible device: the default capacity derives from it.
  uint64_t totals[protocol::kMaxDevices];
  int devices = device_totals(totals, static_cast<int>(protocol::kMaxDevices));
  for (int i = 0; i < devices && g_fd.load() == fd; ++i) {
    protocol::DeviceInfo info{physical_device(i), 0, totals[i]};
    if (!send_message(fd, MessageType::device_info, &info, sizeof info)) break_link(fd);
  }
  return true;
}

// The background thread: reconnects while the daemon is away, watches the connection while not.
void* watch_daemon(void*) {
  bool retry_now = false;  // right after a loss: a daemon restarted by systemd may be back already
  for (;;) {
    int fd = g_fd.load();
    if (fd < 0) {
      if (!retry_now) sleep_ms(kRetryPeriodMs);
      retry_now = false;
      Lock lock;
      const char* why = "";
      if (g_fd.load() < 0 && !connect_and_register(&why) && !g_warned_unreachable) {
        log_warning(
            "gpushared is not reachable at %s (%s): running pass-through, retrying in the "
            "background",
            g_settings.socket_path, why);
        g_warned_unreachable = true;
      }
      if (g_fd.load() >= 0) g_warned_unreachable = false;
      continue;
    }
    // The daemon never sends unsolicited frames: only its going away (EOF, or our own shutdown
    // after a failed request) wakes this poll. POLLIN is not asked for, so replies don't.
    pollfd p{fd, POLLRDHUP, 0};
    int n = poll(&p, 1, kRetryPeriodMs);
    bool hung_up = n > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
    if (hung_up || !still_ours(fd)) {
      Lock lock;
      if (g_fd.load() == fd) {
        lose_daemon(!still_ours(fd)         ? "the program closed the connection's descriptor"
                    : p.revents & POLLRDHUP ? "connection closed"
                                            : "socket error");
        retry_now = true;
      }
    }
  }
  return nullptr;
}

bool start_thread() { return start_background_thread(watch_daemon); }

}  // namespace

bool daemon_link_start(const Settings& settings) {
  Lock lock;
  if (g_started.load()) return true;
  protocol::copy_text(g_settings.socket_path, settings.socket_path.c_str());
  protocol::copy_text(g_settings.job_name, settings.job_name.c_str());
  g_settings.production = settings.production;
  g_settings.quiet = settings.quiet;
  read_visible_devices();

  const char* why = "";
  bool connected = connect_and_register(&why);
  if (!connected && settings.require_daemon) return false;  // cuInit fails; retried next cuInit
  if (!connected) {
    log_warning(
        "gpushared is not reachable at %s (%s): running pass-through, retrying in the "
        "background",
        g_settings.socket_path, why);
    g_warned_unreachable = true;
  }
  if (!g_thread_running.load()) {
    if (start_thread())
      g_thread_running.store(true);
    else
      log_warning("cannot start the daemon-link thread: no reconnection after a daemon loss");
  }
  g_started.store(true);
  return true;
}

bool daemon_link_query_mps(const Settings& settings, protocol::MpsReply* reply, const char** why) {
  // A connection of its own, closed at once: registration comes later, after the real cuInit.
  int fd = connect_daemon(settings.socket_path.c_str(), kMpsQueryTimeoutMs, why);
  if (fd < 0) return false;
  protocol::MpsQuery query{};
  query.requested_class = static_cast<uint32_t>(
      settings.production ? protocol::JobClass::production : protocol::JobClass::opportunistic);
  protocol::copy_text(query.job_name, settings.job_name.c_str());
  static char error[protocol::kMessageSize + 64];
  char text[protocol::kMessageSize] = "";
  bool ok =
      send_message(fd, MessageType::mps_query, &query, sizeof query) &&
      receive_reply(fd, MessageType::mps_reply, reply, sizeof *reply, nullptr, text, sizeof text);
  ::close(fd);
  if (!ok) {
    // An older daemon drops a connection that sends a type it does not know: no MPS, as without one.
    std::snprintf(error, sizeof error, "no valid mps_reply%s%s", *text ? ": " : "", text);
    *why = error;
    return false;
  }
  reply->pipe_directory[sizeof reply->pipe_directory - 1] = '\0';
  reply->message[sizeof reply->message - 1] = '\0';
  return true;
}

int daemon_link_physical_device(int ordinal) { return physical_device(ordinal); }

void daemon_link_announce_site(uint32_t site, const char* text) {
  if (g_fd.load(std::memory_order_relaxed) < 0) return;
  Lock lock;
  int fd = g_fd.load();
  if (fd < 0) return;
  if (!still_ours(fd)) return break_link(fd);
  protocol::AllocSite m{site, 0, {}};
  protocol::copy_text(m.text, text);
  if (!send_message(fd, MessageType::alloc_site, &m, sizeof m)) break_link(fd);
}

bool daemon_link_declare(uint64_t handle, uint64_t bytes, int device, AllocKind kind,
                         uint32_t flags, uint32_t site) {
  if (g_fd.load(std::memory_order_relaxed) < 0) return true;  // pass-through: fail open
  Lock lock;
  int fd = g_fd.load();
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
  if (g_fd.load(std::memory_order_relaxed) < 0) return;
  Lock lock;
  int fd = g_fd.load();
  if (fd < 0) return;
  if (!still_ours(fd)) return break_link(fd);
  protocol::MemRelease m{handle, physical_device(device), 0};
  if (!send_message(fd, MessageType::mem_release, &m, sizeof m)) break_link(fd);
}

void daemon_link_after_fork_child() {
  // Only this thread exists in the child; the mutex may have been held by another parent thread.
  g_mutex = PTHREAD_MUTEX_INITIALIZER;
  set_control_block(local_control_block());  // the parent's block counts the parent's launches
  int fd = g_fd.exchange(-1);
  if (still_ours(fd))
    ::close(fd);  // the parent's registration: closing our copy tells the daemon nothing
  g_thread_running.store(false);
  g_started.store(false);
  g_warned_unreachable = false;
}

}  // namespace gpushare::shim
