// Per-process accounting: calls by hooked symbol, and device memory live and peak per device.
// Launch counters are relaxed atomics (the hot path); the allocation map takes a mutex (rare path).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "daemon_link.h"
#include "hooks.h"

namespace gpushare::shim {

struct Allocation {
  uint64_t handle;  // device pointer, or the VMM handle for cuMemCreate
  uint64_t bytes;
  int device;
  AllocKind kind;
};

// Calls by hook, successful and failed. Relaxed atomics: this is on the launch path.
extern std::atomic<uint64_t> g_calls[kHookCount];
extern std::atomic<uint64_t> g_failed_calls[kHookCount];
// Kernels launched by multi-device cooperative launches (one per device), beyond the call itself.
extern std::atomic<uint64_t> g_multi_device_kernels;

inline void count_call(Hook h, bool ok) {
  (ok ? g_calls : g_failed_calls)[index(h)].fetch_add(1, std::memory_order_relaxed);
}

void record_alloc(const Allocation& a);
// Takes the handle's allocation out of the books. Returns false when it was never recorded
// (freed twice, or allocated before the shim saw it).
bool record_free(uint64_t handle, Allocation* freed);
// Puts back an allocation whose free the driver refused.
void restore_allocation(const Allocation& a);
// A successful free of a handle the shim never saw allocated.
void count_unknown_free();
void for_each_live_allocation(const std::function<void(const Allocation&)>& fn);

struct DeviceMemory {
  uint64_t live_bytes = 0;
  uint64_t peak_bytes = 0;
};
DeviceMemory device_memory(int device);

// Substitutions made by the interception points (for the report and the cross-check).
void count_dlsym_substitution();
void count_proc_address_substitution();
void count_proc_address_unmatched();

// The report written at exit when GPUSHARE_REPORT is set (format: docs/report.md).
std::string report_json();
void write_report_if_requested();

// After fork: the child starts its own accounting from zero.
void reset_accounting_after_fork();
}  // namespace gpushare::shim
