// The "memory" section of gpushared's configuration (docs/memory.md): device capacity, the reserve
// kept back from the physical size, and per-job limits.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpushare/policies/rotation.h"

namespace gpushare::daemon {

// A capacity written as bytes ("16G", 17179869184) or as a fraction of the physical size (0.5).
struct CapacitySpec {
  std::optional<uint64_t> bytes;
  std::optional<double> fraction;  // (0, 1]
  // The capacity this gives on a device of `physical` bytes (0: not known yet).
  std::optional<uint64_t> resolve(uint64_t physical) const;
};

struct MemoryLimitRule {
  std::string job;     // fnmatch(3) pattern on the job name
  uint64_t bytes = 0;  // the job may hold at most this much per device
};

// "memory.rotation" (docs/memory.md, "Rotating residency"): when the opportunistic jobs of a
// device need more than production leaves, they run in turns (policies/rotation.h decides).
struct RotationConfig {
  bool enabled = false;  // needs memory.oversubscribe: only swappable memory can take turns
  policies::RotationOrder order = policies::RotationOrder::weight;
  std::vector<std::string> fixed_order;  // job names, for order "fixed"
  bool prefetch = true;
  std::chrono::milliseconds min_turn{1000};
  double turn_per_swap_in = 4.0;
  // A job whose declared memory grew within this long is still reaching its working set: nothing
  // is prefetched beside it (PyTorch's caching allocator grows over a job's first steps).
  std::chrono::milliseconds growth_quiet{1000};
  // The policy's parameters, with the fixed order's names resolved by `ids_of` (a name's jobs
  // in registration order).
  template <class IdsOf>
  policies::RotationParameters parameters(IdsOf ids_of) const {
    policies::RotationParameters p;
    p.order = order;
    for (const std::string& name : fixed_order)
      for (uint64_t id : ids_of(name)) p.fixed_order.push_back(id);
    p.prefetch = prefetch;
    p.min_turn_s = std::chrono::duration<double>(min_turn).count();
    p.turn_per_swap_in = turn_per_swap_in;
    return p;
  }
};

struct MemoryConfig {
  std::optional<CapacitySpec> capacity;  // all devices; none: physical less the reserve
  std::map<int, CapacitySpec> devices;   // per-device overrides
  // Kept back from the physical size when no capacity is configured: the CUDA context, cuBLAS
  // workspaces and the driver's own allocations are memory the shim never sees declared.
  uint64_t reserve_bytes = uint64_t{1} << 30;
  std::vector<MemoryLimitRule> limits;  // first matching rule wins
  // How long a production allocation waits for opportunistic jobs to move their memory to host
  // before it is let through anyway (the driver then decides). Below the shim's 10 s wait.
  std::chrono::milliseconds swap_timeout{5000};
  // Opportunistic jobs' device allocations become managed memory that can move to host. Off by
  // default: managed memory changes how a job allocates, and on a shared GPU nobody should get
  // managed memory beyond what the card has free unless an operator set a capacity for it.
  bool oversubscribe = false;
  // Declarations checked against the memory NVML sees each process hold (memory_audit.h): how
  // often NVML is read, off the event loop (0: never; fixed at start), and how long declared
  // memory may exceed it before the excess stops counting toward the capacity.
  std::chrono::milliseconds nvml_sample{2000};
  std::chrono::milliseconds declaration_grace{30000};
  RotationConfig rotation;
  // Where to record what gpushare-sim's memory model needs (memory_trace.h); empty: nowhere.
  std::string trace_path;
};

// Parses bytes given as an integer or a string with a K/M/G/T (binary) suffix.
std::optional<uint64_t> parse_bytes(const nlohmann::json& v);

// Parses the section into `out`; each problem is appended to `errors` as "memory.<path>: what".
void parse_memory_config(const nlohmann::json& section, MemoryConfig* out,
                         std::vector<std::string>* errors);

}  // namespace gpushare::daemon
