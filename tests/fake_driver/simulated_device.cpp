#include "simulated_device.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace gpushare::fake {
namespace {

constexpr int kDefaultDevices = 1;
constexpr uint64_t kDefaultMemory = 16ull << 30;
// How long a waiter sleeps before it checks whether the engine's holder is still alive.
constexpr long kLivenessCheckNs = 10'000'000;

DeviceFile* g_file = nullptr;
std::once_flag g_open_once;
int g_pid = 0;

template <class T>
T load(const T& v) {
  return __atomic_load_n(&v, __ATOMIC_SEQ_CST);
}
template <class T>
void store(T& v, T x) {
  __atomic_store_n(&v, x, __ATOMIC_SEQ_CST);
}

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Gone, or a zombie: a real driver releases a process's memory and contexts when it exits (its
// device files close), not when its parent reaps it. Counting zombies as alive made a test that
// kills a client see its memory held until the test's own waitpid().
bool process_is_dead(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) == -1) return errno == ESRCH;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return errno == ENOENT;
  // "pid (comm) state ...": comm may hold spaces and parentheses, the state follows the last ')'.
  char line[512];
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  const char* close = read ? std::strrchr(line, ')') : nullptr;
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

// Parses a positive number with an optional K/M/G/T (binary) suffix; false when malformed.
bool parse_size(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || v == 0 || text[0] == '-') return false;
  int shift = 0;
  switch (*end) {
    case '\0':
      break;
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    default:
      return false;
  }
  if (*end != '\0' && end[1] != '\0') return false;
  if (shift > 0 && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

uint64_t env_size(const char* name, uint64_t fallback, uint64_t max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  uint64_t v = 0;
  if (!parse_size(text, &v) || v > max) {
    std::fprintf(stderr, "fake libcuda: ignoring malformed %s=%s\n", name, text);
    return fallback;
  }
  return v;
}

void init_device_file(DeviceFile* f) {
  std::memset(static_cast<void*>(f), 0, sizeof(DeviceFile));
  f->layout = kDeviceFileLayout;
  f->device_count =
      static_cast<uint32_t>(env_size("GPUSHARE_FAKE_DEVICES", kDefaultDevices, kMaxDevices));
  uint64_t capacity = env_size("GPUSHARE_FAKE_MEMORY", kDefaultMemory, ~0ull);
  for (DeviceState& d : f->devices) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    // Robust: a process killed while holding the lock must not wedge every other process.
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&d.lock, &attr);
    pthread_mutexattr_destroy(&attr);
    d.capacity_bytes = capacity;
  }
  store(f->magic, kDeviceFileMagic);
}

void open_once() {
  g_pid = getpid();
  pthread_atfork(nullptr, nullptr, [] { g_pid = getpid(); });
  std::string path = device_file_path();
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "fake libcuda: cannot open %s: %s\n", path.c_str(), strerror(errno));
    return;
  }
  // Creation is serialised by flock, which the kernel drops if the creator dies.
  flock(fd, LOCK_EX);
  struct stat st {};
  bool fresh = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(DeviceFile);
  if (fresh && ftruncate(fd, sizeof(DeviceFile)) != 0) {
    flock(fd, LOCK_UN);
    close(fd);
    return;
  }
  void* p = mmap(nullptr, sizeof(DeviceFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) {
    auto* f = static_cast<DeviceFile*>(p);
    if (fresh || load(f->magic) != kDeviceFileMagic || load(f->layout) != kDeviceFileLayout) {
      init_device_file(f);
    }
    g_file = f;
  }
  flock(fd, LOCK_UN);
  close(fd);
}

DeviceState& state(int device) {
  return g_file->devices[device];
}

// Holds a device's robust lock; repairs the state when its previous holder died inside.
class DeviceLock {
 public:
  explicit DeviceLock(DeviceState& d) : d_(d) {
    if (pthread_mutex_lock(&d_.lock) == EOWNERDEAD) pthread_mutex_consistent(&d_.lock);
  }
  ~DeviceLock() { pthread_mutex_unlock(&d_.lock); }
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

 private:
  DeviceState& d_;
};

// Under the device lock: frees the slots of dead processes and recomputes the totals from the
// table, so that a process that died mid-update leaves no lasting error.
void reclaim_dead_processes(DeviceState& d) {
  uint64_t used = 0, managed = 0;
  for (ProcessMemory& p : d.processes) {
    if (p.pid != 0 && p.pid != g_pid && process_is_dead(p.pid)) p = ProcessMemory{};
    used += p.bytes;
    managed += p.managed_bytes;
  }
  store(d.used_bytes, used);
  store(d.managed_bytes, managed);
}

uint32_t take_ticket(Engine& e, DeviceState& d) {
  for (;;) {
    {
      DeviceLock lock(d);
      uint32_t ticket = e.next_ticket;
      if (ticket - load(e.now_serving) < kTicketSlots) {
        store(e.ticket_pid[ticket % kTicketSlots], static_cast<int32_t>(g_pid));
        store(e.next_ticket, ticket + 1);
        return ticket;
      }
    }
    timespec pause{0, 1'000'000};  // every slot is taken: let the queue drain a little
    nanosleep(&pause, nullptr);
  }
}

// The holder of ticket `serving` died (while running or while waiting): pass its turn on.
void skip_if_dead(Engine& e, uint32_t serving) {
  if (!process_is_dead(load(e.ticket_pid[serving % kTicketSlots]))) return;
  uint32_t expected = serving;
  if (__atomic_compare_exchange_n(&e.now_serving, &expected, serving + 1, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST)) {
    futex(&e.now_serving, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

void wait_for_turn(Engine& e, uint32_t ticket) {
  for (;;) {
    uint32_t serving = load(e.now_serving);
    if (serving == ticket) return;
    __atomic_fetch_add(&e.waiters, 1, __ATOMIC_SEQ_CST);
    serving = load(e.now_serving);
    if (serving != ticket) {
      timespec timeout{0, kLivenessCheckNs};
      if (futex(&e.now_serving, FUTEX_WAIT, serving, &timeout) == -1 && errno == ETIMEDOUT) {
        skip_if_dead(e, serving);
      }
    }
    __atomic_fetch_sub(&e.waiters, 1, __ATOMIC_SEQ_CST);
  }
}

void release_turn(Engine& e, uint32_t ticket) {
  uint32_t expected = ticket;
  __atomic_compare_exchange_n(&e.now_serving, &expected, ticket + 1, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  if (load(e.waiters) > 0) futex(&e.now_serving, FUTEX_WAKE, INT_MAX, nullptr);
}
}  // namespace

DeviceFile* open_device_file() {
  std::call_once(g_open_once, open_once);
  return g_file;
}

int device_count() {
  return g_file != nullptr ? static_cast<int>(g_file->device_count) : 0;
}

int current_pid() {
  return g_pid;
}

void run_kernel(int device, uint64_t duration_ns) {
  DeviceState& d = state(device);
  Engine& e = d.engine;
  uint32_t ticket = take_ticket(e, d);
  wait_for_turn(e, ticket);
  uint64_t start = now_ns();
  if (duration_ns > 0) {
    uint64_t deadline = start + duration_ns;
    timespec ts{static_cast<time_t>(deadline / 1'000'000'000ull),
                static_cast<long>(deadline % 1'000'000'000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  uint64_t held = now_ns() - start;
  __atomic_fetch_add(&d.kernels, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&d.busy_ns, held, __ATOMIC_RELAXED);
  release_turn(e, ticket);
}

MemoryResult account_alloc(int device, uint64_t bytes, bool managed) {
  DeviceState& d = state(device);
  DeviceLock lock(d);
  reclaim_dead_processes(d);
  if (!managed && (bytes > d.capacity_bytes || d.used_bytes > d.capacity_bytes - bytes)) {
    return MemoryResult::out_of_memory;
  }
  ProcessMemory* mine = nullptr;
  ProcessMemory* free_slot = nullptr;
  for (ProcessMemory& p : d.processes) {
    if (p.pid == g_pid) mine = &p;
    if (p.pid == 0 && free_slot == nullptr) free_slot = &p;
  }
  if (mine == nullptr) {
    if (free_slot == nullptr) return MemoryResult::too_many_processes;
    mine = free_slot;
    store(mine->pid, static_cast<int32_t>(g_pid));
  }
  store(mine->bytes, mine->bytes + bytes);
  store(d.used_bytes, d.used_bytes + bytes);
  if (managed) {
    store(mine->managed_bytes, mine->managed_bytes + bytes);
    store(d.managed_bytes, d.managed_bytes + bytes);
  }
  return MemoryResult::ok;
}

void account_free(int device, uint64_t bytes, bool managed, int owner_pid) {
  if (owner_pid != g_pid) return;
  DeviceState& d = state(device);
  DeviceLock lock(d);
  for (ProcessMemory& p : d.processes) {
    if (p.pid != g_pid) continue;
    store(p.bytes, p.bytes - std::min(p.bytes, bytes));
    if (managed) store(p.managed_bytes, p.managed_bytes - std::min(p.managed_bytes, bytes));
    if (p.bytes == 0) store(p.pid, 0);
    break;
  }
  reclaim_dead_processes(d);
}

int processes_on(int device, ProcessMemory* out, int max) {
  DeviceState& d = state(device);
  DeviceLock lock(d);
  reclaim_dead_processes(d);
  int n = 0;
  for (const ProcessMemory& p : d.processes) {
    if (p.pid == 0 || p.bytes == 0) continue;
    if (n < max) out[n] = p;
    ++n;
  }
  return n;
}

MemoryInfo memory_info(int device) {
  DeviceState& d = state(device);
  DeviceLock lock(d);
  reclaim_dead_processes(d);
  uint64_t free_bytes = d.used_bytes < d.capacity_bytes ? d.capacity_bytes - d.used_bytes : 0;
  return MemoryInfo{d.capacity_bytes, d.used_bytes, free_bytes};
}
}  // namespace gpushare::fake
