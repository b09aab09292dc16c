// Whether a job's declared device memory is backed by memory its process really holds.
//
// A job's memory is what its shim declares before each allocation (docs/memory.md), and the
// client controls its shim: it can declare memory it never allocates and so keep capacity from
// others. NVML reports what each process really holds on the device. The two never agree
// exactly, so the check is one-sided and patient:
//
//   - measured above declared is fine: NVML counts the CUDA context, cuBLAS workspaces and the
//     pools of cudaMallocAsync, none of which the shim declares;
//   - declared above measured by no more than the slack, max(64 MiB, 10 % of declared), is
//     fine: allocation granularity, a declaration made just before its allocation;
//   - declared above measured + slack is tolerated for a grace period (an allocation in flight:
//     the shim declares before it allocates), then the job is over-declaring, and the bytes
//     beyond measured + slack are what admission stops honouring.
//
// A process NVML does not list holds nothing, but only when NVML's list can be trusted to name
// the job's process at all: not under MPS (NVML lists the MPS server, not its clients) and not
// when the daemon sees other pids than NVML (another pid namespace). The caller decides that.
// Pure: no clock, no I/O; durations come in as numbers.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace gpushare::policies {

struct DeclarationCheckParams {
  uint64_t slack_floor_bytes = uint64_t{64} << 20;
  double slack_fraction = 0.10;  // of the declared bytes
  std::chrono::milliseconds grace{30000};
};

struct DeclarationSample {
  uint64_t declared_bytes = 0;
  // What NVML says the job's process holds; nullopt: its pid is not in NVML's list.
  std::optional<uint64_t> measured_bytes;
  // NVML's list names every process of this device that holds memory, so a process not in it
  // holds none (false under MPS, or while NVML's pids are not known to be the daemon's).
  bool listing_complete = false;
  // How long declared has been above measured + slack without a break, before this sample.
  std::chrono::milliseconds excess_lasted{0};
};

enum class DeclarationVerdict {
  backed,           // declared within measured + slack (or below measured)
  excess_in_grace,  // above measured + slack, not yet for longer than the grace period
  over_declaring,   // above measured + slack for longer than the grace period
  not_measured,     // no trustworthy measurement: nothing is decided
};
const char* declaration_verdict_name(DeclarationVerdict v);

struct DeclarationCheck {
  DeclarationVerdict verdict = DeclarationVerdict::not_measured;
  uint64_t excess_bytes = 0;      // declared - (measured + slack), when positive
  uint64_t unhonoured_bytes = 0;  // the excess when over-declaring, else 0
};

// max(slack_floor_bytes, slack_fraction × declared).
uint64_t declaration_slack(uint64_t declared_bytes, const DeclarationCheckParams& params);

DeclarationCheck check_declaration(const DeclarationSample& sample,
                                   const DeclarationCheckParams& params);

}  // namespace gpushare::policies
