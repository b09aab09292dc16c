// The daemon link's state, shared by the files that make up the link and by nothing else (the rest
// of the shim sees daemon_link.h):
//   daemon_link.cpp          start, loss of the daemon, fork
//   registration.cpp         connect, register, map the control block, place the devices
//   daemon_watcher.cpp       the background thread that notices a lost daemon and reconnects
//   memory_declarations.cpp  allocations declared to the daemon
//   daemon_socket.cpp        one request and its reply on a socket (no state)
//
// This runs inside any host program, so: no exceptions, no logging library, every socket
// operation bounded by a timeout, and nothing here may block a launch. All of it is trivially
// destructible, so the background thread is harmless during exit().
#pragma once

#include <pthread.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>

#include "gpushare/protocol/wire.h"
#include "visible_devices.h"

namespace gpushare::shim {

struct Allocation;

// What daemon_link_start copied out of Settings: plain data the background thread can read at
// any time, even while exit() destroys the Settings object.
struct LinkSettings {
  char socket_path[sizeof(sockaddr_un::sun_path)] = {};
  char job_name[protocol::kJobNameSize] = {};
  bool production = false;
  bool quiet = false;
  // From a numeric CUDA_VISIBLE_DEVICES (count 0: any device): registered, and in force when the
  // daemon cannot place the devices' UUIDs.
  DeviceTable numeric_devices;
  protocol::DeviceUuids uuids = {};  // of each ordinal, from the driver; count 0: not known
  bool warned_unplaced = false;      // one warning per process when the daemon cannot place a UUID
};

struct DaemonLink {
  LinkSettings settings;
  // Serialises every request/reply on the socket and every (re)connection.
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<int> fd{-1};  // the registered connection, or -1 (pass-through)
  std::atomic<bool> started{false};
  std::atomic<bool> thread_running{false};
  bool warned_unreachable = false;  // under mutex: one warning while the daemon stays away
  // Identity of our socket. A host program may close descriptors it does not own (daemonising
  // code closes 3..N) and reuse the number: before any operation on `fd` the link checks it still
  // is its own socket, so it never sends to, shuts down or closes a descriptor of the host.
  std::atomic<uint64_t> socket_inode{0};
};

extern constinit DaemonLink g_link;

struct LinkLock {
  LinkLock() { pthread_mutex_lock(&g_link.mutex); }
  ~LinkLock() { pthread_mutex_unlock(&g_link.mutex); }
  LinkLock(const LinkLock&) = delete;
  LinkLock& operator=(const LinkLock&) = delete;
};

// Whether `fd` is still the link's own socket (see DaemonLink::socket_inode).
bool still_ours(int fd);

// An informational line, written the way log.cpp writes (one write(2)), without settings().
void say(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Under the lock: one warning while the daemon stays away.
void warn_unreachable(const char* why);

// Under the lock: the daemon is gone; back to pass-through (the background thread reconnects).
void lose_daemon(const char* why);

// A request failed mid-way: stop using the socket now; the background thread notices the
// shutdown (POLLHUP), closes it and reconnects. The descriptor is not closed here, so the thread
// can never poll a number the host program has reused.
void break_link(int fd);

// Under the lock: connect, register, map the control block, place the devices, re-declare live
// allocations (registration.cpp). False, with *why, when not registered.
bool connect_and_register(const char** why);

// Under the lock, while connected: one MemDeclare round trip (flags: MemDeclareFlags bits). False
// when the link broke or the daemon did not answer in time (memory_declarations.cpp).
bool declare_locked(int fd, const Allocation& a, uint32_t flags, uint32_t site, bool* admitted);

// Starts the background thread (daemon_watcher.cpp). False when it could not be created.
bool start_watcher();

}  // namespace gpushare::shim
