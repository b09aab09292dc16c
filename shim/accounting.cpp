#include "accounting.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "log.h"
#include "settings.h"

extern char* program_invocation_short_name;

namespace gpushare::shim {

std::atomic<uint64_t> g_calls[kHookCount];
std::atomic<uint64_t> g_failed_calls[kHookCount];
std::atomic<uint64_t> g_multi_device_kernels;

namespace {

struct Memory {
  std::mutex mutex;
  std::unordered_map<uint64_t, Allocation> live;
  std::map<int, DeviceMemory> devices;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t unknown_frees = 0;
};
// Leaked on purpose: the exit report runs from a destructor, after other statics may be gone.
Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

std::atomic<uint64_t> g_dlsym_substitutions;
std::atomic<uint64_t> g_proc_address_substitutions;
std::atomic<uint64_t> g_proc_address_unmatched;
std::atomic<bool> g_forked_child;

}  // namespace

void record_alloc(const Allocation& a) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  m.live[a.handle] = a;
  ++m.allocations;
  DeviceMemory& d = m.devices[a.device];
  d.live_bytes += a.bytes;
  if (d.live_bytes > d.peak_bytes) d.peak_bytes = d.live_bytes;
}

bool record_free(uint64_t handle, Allocation* freed) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.live.find(handle);
  if (it == m.live.end()) return false;
  if (freed) *freed = it->second;
  m.devices[it->second.device].live_bytes -= it->second.bytes;
  ++m.frees;
  m.live.erase(it);
  return true;
}

void restore_allocation(const Allocation& a) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  m.live[a.handle] = a;
  --m.frees;
  m.devices[a.device].live_bytes += a.bytes;
}

void count_unknown_free() {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  ++m.unknown_frees;
}

void for_each_live_allocation(const std::function<void(const Allocation&)>& fn) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  for (const auto& [handle, a] : m.live) fn(a);
}

DeviceMemory device_memory(int device) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  auto it = m.devices.find(device);
  return it == m.devices.end() ? DeviceMemory{} : it->second;
}

void count_dlsym_substitution() { g_dlsym_substitutions.fetch_add(1, std::memory_order_relaxed); }
void count_proc_address_substitution() {
  g_proc_address_substitutions.fetch_add(1, std::memory_order_relaxed);
}
void count_proc_address_unmatched() {
  g_proc_address_unmatched.fetch_add(1, std::memory_order_relaxed);
}

std::string report_json() {
  using nlohmann::json;
  json calls = json::object(), failed = json::object();
  json launches = json::object(), graphs = json::object();
  uint64_t launch_total = g_multi_device_kernels.load(std::memory_order_relaxed);
  uint64_t graph_total = 0;
  for (size_t i = 0; i < kHookCount; ++i) {
    uint64_t n = g_calls[i].load(std::memory_order_relaxed);
    calls[kHooks[i].name] = n;
    failed[kHooks[i].name] = g_failed_calls[i].load(std::memory_order_relaxed);
    if (kHooks[i].family == Family::launch) {
      launches[kHooks[i].name] = n;
      launch_total += n;
    } else if (kHooks[i].family == Family::launch_multi) {
      launches[kHooks[i].name] = n;  // calls; the kernels they launched are in the total
    } else if (kHooks[i].family == Family::graph_launch) {
      graphs[kHooks[i].name] = n;
      graph_total += n;
    }
  }
  json report = {
      {"version", 1},
      {"pid", static_cast<int>(getpid())},
      {"program", program_invocation_short_name ? program_invocation_short_name : ""},
      {"calls", calls},
      {"failed_calls", failed},
      {"launches", {{"total", launch_total}, {"by_entry_point", launches}}},
      {"graph_launches", {{"total", graph_total}, {"by_entry_point", graphs}}},
      {"interception",
       {{"dlsym_substitutions", g_dlsym_substitutions.load()},
        {"proc_address_substitutions", g_proc_address_substitutions.load()},
        {"proc_address_unmatched", g_proc_address_unmatched.load()}}},
  };
  {
    Memory& m = memory();
    std::lock_guard lock(m.mutex);
    report["allocations"] = {
        {"count", m.allocations}, {"frees", m.frees}, {"unknown_frees", m.unknown_frees}};
    json devices = json::array();
    for (const auto& [device, d] : m.devices)
      devices.push_back({{"device", device}, {"live_bytes", d.live_bytes},
                         {"peak_bytes", d.peak_bytes}});
    report["memory"] = devices;
  }
  protocol::ControlBlock* block = control_block();
  report["daemon"] = {
      {"connected", block != local_control_block()},
      {"job_class", block->job_class.load() == static_cast<uint32_t>(protocol::JobClass::production)
                        ? "production"
                        : "opportunistic"},
      // What the gate cost the job under the block in force at exit (docs/protocol.md): launches
      // that waited, and the time they waited.
      {"gate_waits", block->gate_waits.load(std::memory_order_relaxed)},
      {"gated_ns", block->gated_ns.load(std::memory_order_relaxed)}};
  return report.dump(2) + "\n";
}

namespace {
// "%p" -> pid; a forked child that inherited a name without "%p" writes "<name>.<pid>".
std::string report_file_name(const std::string& pattern) {
  std::string name;
  bool has_pid = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      name += std::to_string(getpid());
      has_pid = true;
      ++i;
    } else {
      name += pattern[i];
    }
  }
  if (!has_pid && g_forked_child.load()) name += "." + std::to_string(getpid());
  return name;
}
}  // namespace

void write_report_if_requested() {
  const Settings& s = settings();
  uint64_t unmatched = g_proc_address_unmatched.load();
  if (unmatched)
    log_warning("%llu cuGetProcAddress answers for hooked symbols matched no known driver entry "
                "point: launches may have been missed",
                static_cast<unsigned long long>(unmatched));
  if (s.report_path.empty()) return;
  // A process that never called CUDA (a wrapper such as `timeout`, or a launcher script, with the
  // shim inherited through LD_PRELOAD) has nothing to report, and writing its zeros would replace
  // the report of the job it ran, which exits before it.
  bool used_cuda = false;
  for (size_t i = 0; i < kHookCount; ++i)
    used_cuda = used_cuda || g_calls[i].load(std::memory_order_relaxed) != 0 ||
                g_failed_calls[i].load(std::memory_order_relaxed) != 0;
  if (!used_cuda) return;
  std::string name = report_file_name(s.report_path);
  std::string body = report_json();
  std::string tmp = name + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    log_warning("cannot write report %s: %s", tmp.c_str(), std::strerror(errno));
    return;
  }
  bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size());
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), name.c_str()) != 0)
    log_warning("cannot write report %s: %s", name.c_str(), std::strerror(errno));
}

void reset_accounting_after_fork() {
  for (auto& c : g_calls) c.store(0, std::memory_order_relaxed);
  for (auto& c : g_failed_calls) c.store(0, std::memory_order_relaxed);
  g_multi_device_kernels.store(0);
  g_dlsym_substitutions.store(0);
  g_proc_address_substitutions.store(0);
  g_proc_address_unmatched.store(0);
  g_forked_child.store(true);
  // Another thread of the parent may have held the mutex or been inside the map at fork time:
  // start from a fresh object and leak the old contents.
  new (&memory()) Memory;
}

}  // namespace gpushare::shim
