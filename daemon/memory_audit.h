// Declarations checked against real use (docs/memory.md, "Declared is not allocated"): each NVML
// reading (nvml_usage.h) is matched to the jobs by the pid the kernel gave the daemon
// (SO_PEERCRED), and policies/declaration_check.h decides per job whether its declarations are
// backed. What a job declares beyond what its process holds plus the slack, for longer than the
// grace period, stops counting toward the device's capacity (memory_broker.cpp, device_use):
// others are admitted into that room. The job itself is never dropped, refused or paused for it,
// and its limit still counts all it declared.
//
// NVML names the jobs' processes only where its pids are the daemon's pids: under MPS the MPS
// server holds its clients' memory, and a daemon in another pid namespace than NVML's sees other
// numbers. So nobody is judged while a reading lists an MPS server, and a job absent from NVML's
// list counts as holding nothing only once some job's pid has been found in it; the log says
// why, once.
//
// Jobs are matched by pid over all devices: the daemon's device numbers are the jobs' CUDA
// ordinals, NVML's are physical, and the two differ under CUDA_VISIBLE_DEVICES. A job's
// unhonoured bytes are spread over its devices in proportion to what it declared on each.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "gpushare/policies/declaration_check.h"
#include "log_limiter.h"
#include "nvml_usage.h"
#include "registry.h"

namespace gpushare::daemon {

// The declared bytes of `job` on `device` that are checked: all but its swappable (managed)
// memory, which is on the device only once touched, so NVML may rightly show less of it; an
// opportunistic job's can be moved to host for production anyway.
uint64_t checked_bytes(const Job& job, int device);

class DeclarationAudit {
 public:
  // Applies one reading to every job: its measured bytes, since when any excess lasts, and what
  // admission stops honouring. True when some job's unhonoured bytes changed (the jobs' views
  // must be published again).
  bool apply(Registry& registry, const NvmlReading& reading,
             const policies::DeclarationCheckParams& params, Clock::time_point now,
             LogLimiter& log_limiter);

  // Whether a job's absence from NVML's list means it holds nothing (see above).
  bool listing_trusted() const { return pids_matched_ && !under_mps_; }

 private:
  void note_pid_namespace(bool jobs_hold_memory, const policies::DeclarationCheckParams& params,
                          Clock::time_point now);

  // Since when the declarations of a pid's jobs exceed what it holds, and when that was last
  // seen: kept by pid, not by job, so that reconnecting does not restart the grace period. Kept
  // one grace period after the pid's last job left.
  struct Excess {
    Clock::time_point since, seen;
  };
  std::map<pid_t, Excess> excess_;
  bool pids_matched_ = false;  // some job's pid was once in NVML's list
  bool under_mps_ = false;     // the last reading listed an MPS server
  std::optional<Clock::time_point> unmatched_since_;
  bool namespace_noted_ = false;
  std::set<unsigned> mps_noted_;  // NVML device indices already named in the log
};

}  // namespace gpushare::daemon
