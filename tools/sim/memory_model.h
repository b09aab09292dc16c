// The memory model of gpushare-sim (a memory manager, a scheduler and an execution-time simulator).
//
// A job is a chain of steps. Before a step computes, the job's whole working set must be on the
// device (the thesis's assumption: "before each client starts its computation, it copies a fixed
// size of data to GPU memory"). The device has one copy engine and one compute engine. A schedule
// is the order of all steps (each job's steps in their own order, i.e. a topological order of the
// chains); both engines follow it: copies start in schedule order, computes run in schedule order,
// and a job's next step cannot compute before its idle time (CPU work) after its last one.
//
// Memory manager: a job stays resident until room is needed; then the resident job whose next
// step is farthest in the schedule goes out (Belady: the schedule is known). Without prefetch, a
// copy starts only when the previous step's compute has ended (copy, compute, copy, compute...).
// With prefetch, the next copies start as soon as the copy engine is free: first into the free
// room, the rest once the jobs going out have finished their last compute before it (and, with
// `writeback`, have been copied out on the same engine). Time and bandwidth are in seconds and
// bytes per second; nothing depends on a clock, so a run is deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpushare::sim {

struct MemoryJob {
  std::string name;
  double compute_s = 0;  // GPU time of one step
  double idle_s = 0;     // CPU time between two steps of the job (data loading, logging)
  uint64_t bytes = 0;    // working set: on the device while a step computes
  uint32_t steps = 1;
  uint64_t arrival = 0;  // registration order, for FIFO
};

struct MemoryCase {
  std::vector<MemoryJob> jobs;
  uint64_t capacity_bytes = 0;
  uint64_t production_bytes = 0;  // held by production: never moved, never given to the jobs
  double host_to_device_bytes_per_s = 1;
  double device_to_host_bytes_per_s = 1;
  bool writeback = false;  // a job going out is copied back to the host (its data changed)
};

// The order of all steps, as job indices: the k-th occurrence of job j is its step k, so any
// sequence holding each job `steps` times is a valid (topological) schedule.
using StepOrder = std::vector<size_t>;

struct StepTimes {
  size_t job = 0;
  bool copied = false;  // its working set was copied in before this step
  double copy_start_s = 0, copy_end_s = 0;
  double compute_start_s = 0, compute_end_s = 0;
};

struct MemoryRun {
  double makespan_s = 0;  // the end of the last compute
  double compute_s = 0;   // sum of the steps' compute
  double copy_s = 0;      // time the copy engine was busy
  double stall_s = 0;     // time a ready step waited for its data: the copy time not hidden
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;  // with writeback
  uint32_t swap_ins = 0;
  std::vector<StepTimes> steps;  // in schedule order
};

// The reason a case cannot run (a job larger than the room production leaves, no bandwidth), or
// empty.
std::string check_case(const MemoryCase& memory_case);

// Runs `order` on the case's device; the order must hold each job `steps` times (checked).
MemoryRun run_schedule(const MemoryCase& memory_case, const StepOrder& order, bool prefetch);

// The thesis's per-client quantities: reward = compute / (compute + idle) over a window of steps,
// penalty = seconds to bring the working set back to the device.
double job_reward(const MemoryJob& job);
double job_penalty_s(const MemoryJob& job, const MemoryCase& memory_case);

}  // namespace gpushare::sim
