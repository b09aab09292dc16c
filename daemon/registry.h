// The jobs the daemon knows: one per registered shim connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "authorization.h"
#include "gpushare/protocol/control_block.h"
#include "memory_job.h"
#include "shared_control_block.h"

namespace gpushare::daemon {

using Clock = std::chrono::steady_clock;

// Kernels per second from samples of a job's launch counter over the last second. The counter is
// written by the client, so it is untrusted: a counter that goes backwards restarts the window.
class LaunchRate {
 public:
  void sample(Clock::time_point now, uint64_t launches);
  double per_second() const;
  uint64_t last() const { return samples_.empty() ? 0 : samples_.back().second; }

 private:
  std::deque<std::pair<Clock::time_point, uint64_t>> samples_;
};

struct DeclaredAllocation {
  uint64_t bytes = 0;
  uint32_t kind = 0;
  uint32_t flags = 0;  // protocol::MemDeclareFlags bits (swappable, reservation)
  uint32_t site = 0;   // allocation site id (GPUSHARE_TRACE_ALLOC), 0: not traced
  // Reservations only: when admitted (they expire unless released), and whether a commit has
  // already claimed it (one reservation covers one commit; memory_admission.cpp).
  std::chrono::steady_clock::time_point admitted{};
  bool claimed = false;
};

// The bytes an allocation holds on its device. A claimed reservation holds none: the commit that
// claimed it holds them, and counting both until the shim releases the reservation (right after
// its allocation; a tick or more on a busy machine) showed less room than there was (a rotation's
// prefetch decided then was 0 bytes).
inline uint64_t held_bytes(const DeclaredAllocation& a) {
  return a.claimed ? 0 : a.bytes;
}

// A job's declared memory on one device, summed as allocations come and go (admission and the
// views read these sums instead of walking every allocation), each allocation's held_bytes.
struct DeviceMemory {
  uint64_t bytes = 0;      // unclaimed reservations included
  uint64_t swappable = 0;  // of them, flagged swappable
  size_t allocations = 0;
};

struct Job {
  uint64_t id = 0;
  int connection = -1;      // the shim's socket
  Peer peer;                // from SO_PEERCRED
  uint32_t client_pid = 0;  // the pid as the client sees it (pid namespaces)
  std::string name;
  protocol::JobClass requested = protocol::JobClass::opportunistic;
  protocol::JobClass granted = protocol::JobClass::opportunistic;
  // The physical devices it may use: its CUDA ordinals placed by UUID (device_sessions.h), else as
  // registered (a numeric CUDA_VISIBLE_DEVICES); empty: not known.
  std::vector<int> devices;
  // (device, handle) -> allocation. Changed only through set_allocation / erase_allocation, which
  // keep memory_on and reservations right.
  std::map<std::pair<int, uint64_t>, DeclaredAllocation> memory;
  std::map<int, DeviceMemory> memory_on;  // device -> sums of `memory` there
  size_t reservations = 0;                // entries of `memory` flagged reservation
  SharedControlBlock block;
  LaunchRate rate;
  Clock::time_point registered;
  JobMemory memory_state;  // memory broker: swap state, limit, reward (docs/memory.md)
  uint32_t refused_in_a_row = 0;  // memory requests refused since its last admitted one
  // The daemon made the process a client of its MPS before its cuInit (mps_sessions.h).
  bool mps_client = false;

  using AllocationKey = std::pair<int, uint64_t>;
  // Adds or replaces an allocation; erases one (false, or end(), when there was none).
  void set_allocation(const AllocationKey& key, const DeclaredAllocation& allocation);
  bool erase_allocation(const AllocationKey& key);
  std::map<AllocationKey, DeclaredAllocation>::iterator erase_allocation(
      std::map<AllocationKey, DeclaredAllocation>::iterator it);

  uint64_t memory_bytes() const;
  std::map<int, uint64_t> memory_by_device() const;
  // The devices it holds memory on, else those it may use. A process that sees several devices
  // and works on one (a DDP rank with all GPUs visible) is placed by its memory.
  std::vector<int> devices_in_use() const;
};

class Registry {
 public:
  uint64_t next_id() { return ++last_id_; }
  Job& add(Job job);
  void remove(uint64_t id);
  Job* find(uint64_t id);
  Job* find_by_connection(int fd);
  std::vector<Job*> find_by_pid(pid_t pid);
  std::vector<Job*> find_by_name(const std::string& name);
  std::map<uint64_t, Job>& jobs() { return jobs_; }
  size_t size() const { return jobs_.size(); }

  // The tick: samples every job's launch counter.
  void sample(Clock::time_point now);

 private:
  uint64_t last_id_ = 0;
  std::map<uint64_t, Job> jobs_;
};

}  // namespace gpushare::daemon
