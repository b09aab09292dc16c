// Whether a declared allocation may have device memory, and whose memory moves to host to make
// room: the daemon's memory admission as a pure function of numbers (docs/memory.md). The daemon
// gathers the numbers, calls this, and carries out the answer (reply, swap requests, a waiting
// production admission).
//
// The rules, in order:
// - over the job's own limit: refused;
// - capacity unknown: admitted (nothing to check against);
// - an opportunistic job: admitted where it fits beside what is resident and what production
//   waits for; else, if its memory can move, admitted on host (it waits there until room
//   returns); else refused, the device is full;
// - a production job: admitted where it fits and no earlier production admission waits; refused
//   when even every opportunistic job on host would not make room; else it waits while the
//   opportunistic jobs holding the most movable memory go to host, as few as make it fit.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "job_class.h"

namespace gpushare::policies {

// One device's memory as the daemon accounts it.
struct DeviceMemory {
  uint64_t capacity = 0;
  uint64_t resident = 0;   // on the device: reservations and jobs swapping in included
  uint64_t evictable = 0;  // movable bytes of opportunistic jobs whose memory is on the device
  uint64_t leaving = 0;    // movable bytes of jobs moving to host now, not yet moved
  uint64_t waiting = 0;    // bytes of production admissions waiting for room
};

// An opportunistic job whose memory could move to host. (Not SwapCandidate, swap_order.h's:
// two types of one name in one namespace broke std::vector<SwapCandidate>'s copy in gpushared,
// a heap overflow that AddressSanitizer caught, 2026-11-26.)
struct MovableJob {
  uint64_t job_id = 0;
  uint64_t movable = 0;  // its movable bytes on the device
};

struct AdmissionRequest {
  JobClass job_class = JobClass::opportunistic;
  uint64_t bytes = 0;
  bool movable = false;                          // the allocation can move to host (managed memory)
  bool job_on_host = false;                      // the job's memory is on (or going to) the host
  uint64_t job_bytes = 0;                        // what the job holds on this device already
  std::optional<uint64_t> limit = std::nullopt;  // the job's limit, if any
};

enum class AdmissionVerdict {
  admit,
  admit_on_host,           // admitted; the job's memory goes (or stays) on the host
  wait_for_room,           // production: admitted once `swap_out` have moved to host
  refuse_over_limit,       // the job's own limit
  refuse_device_full,      // opportunistic memory that cannot move, on a full device
  refuse_beyond_capacity,  // production that would not fit with every opportunistic job on host
};

struct Admission {
  AdmissionVerdict verdict = AdmissionVerdict::admit;
  std::vector<uint64_t> swap_out = {};  // job ids to move to host, for wait_for_room
};

Admission decide_admission(const AdmissionRequest& request,
                           const std::optional<DeviceMemory>& device,
                           std::vector<MovableJob> candidates);

}  // namespace gpushare::policies
