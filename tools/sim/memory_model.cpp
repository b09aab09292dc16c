// The memory model (memory_model.h): one pass over the schedule, keeping for each engine the time
// it is free and for each job when its data was last used, when it may compute again and where it
// is used next (for the Belady choice of what goes out).
#include "memory_model.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace gpushare::sim {
namespace {

constexpr size_t kNever = std::numeric_limits<size_t>::max();

uint64_t budget(const MemoryCase& memory_case) {
  return memory_case.capacity_bytes > memory_case.production_bytes
             ? memory_case.capacity_bytes - memory_case.production_bytes
             : 0;
}

// For each position, the next position of the same job (kNever if none).
std::vector<size_t> next_uses(const StepOrder& order, size_t jobs) {
  std::vector<size_t> next(order.size()), last(jobs, kNever);
  for (size_t i = order.size(); i-- > 0;) {
    next[i] = last[order[i]];
    last[order[i]] = i;
  }
  return next;
}

void check_order(const MemoryCase& memory_case, const StepOrder& order) {
  std::vector<uint32_t> count(memory_case.jobs.size(), 0);
  for (size_t job : order) {
    if (job >= count.size()) throw std::invalid_argument("schedule names a job that is not there");
    ++count[job];
  }
  for (size_t j = 0; j < count.size(); ++j)
    if (count[j] != memory_case.jobs[j].steps)
      throw std::invalid_argument("schedule does not hold job '" + memory_case.jobs[j].name +
                                  "' once per step");
}

}  // namespace

std::string check_case(const MemoryCase& memory_case) {
  if (memory_case.host_to_device_bytes_per_s <= 0 || memory_case.device_to_host_bytes_per_s <= 0)
    return "bandwidths must be positive";
  for (const MemoryJob& job : memory_case.jobs) {
    if (job.bytes > budget(memory_case))
      return "job '" + job.name + "' needs more memory than production leaves on the device";
    if (job.steps == 0) return "job '" + job.name + "' has no steps";
    if (job.compute_s < 0 || job.idle_s < 0) return "job '" + job.name + "' has a negative time";
  }
  return {};
}

double job_reward(const MemoryJob& job) {
  const double period = job.compute_s + job.idle_s;
  return period > 0 ? job.compute_s / period : 1.0;
}

double job_penalty_s(const MemoryJob& job, const MemoryCase& memory_case) {
  return static_cast<double>(job.bytes) / memory_case.host_to_device_bytes_per_s;
}

MemoryRun run_schedule(const MemoryCase& memory_case, const StepOrder& order, bool prefetch) {
  check_order(memory_case, order);
  const std::vector<MemoryJob>& jobs = memory_case.jobs;
  const size_t n = jobs.size();
  const std::vector<size_t> next_use = next_uses(order, n);
  const double in_rate = memory_case.host_to_device_bytes_per_s;
  const double out_rate = memory_case.device_to_host_bytes_per_s;

  std::vector<size_t> upcoming(n, kNever);  // the job's next position at or after the current one
  for (size_t i = order.size(); i-- > 0;) upcoming[order[i]] = i;
  std::vector<bool> resident(n, false);
  std::vector<double> released(n, 0);   // end of the job's last compute so far
  std::vector<double> may_start(n, 0);  // that end plus the job's idle time
  uint64_t used = 0;
  double copy_free = 0, compute_free = 0;
  MemoryRun run;

  for (size_t i = 0; i < order.size(); ++i) {
    const size_t j = order[i];
    const MemoryJob& job = jobs[j];
    double data_ready = 0;
    StepTimes times;
    times.job = j;
    if (!resident[j]) {
      const double start = prefetch ? copy_free : std::max(copy_free, compute_free);
      const uint64_t room = budget(memory_case) - used;
      const uint64_t first = std::min(room, job.bytes);
      double t = start + static_cast<double>(first) / in_rate;
      const uint64_t rest = job.bytes - first;
      uint64_t freed = 0, written_back = 0;
      double victims_done = 0;
      while (freed < rest) {
        size_t victim = kNever;
        for (size_t v = 0; v < n; ++v) {
          if (!resident[v] || v == j) continue;
          // Farthest next use goes out; a job with none left (kNever) first of all.
          if (victim == kNever || upcoming[v] > upcoming[victim]) victim = v;
        }
        resident[victim] = false;
        used -= jobs[victim].bytes;
        freed += jobs[victim].bytes;
        victims_done = std::max(victims_done, released[victim]);
        if (memory_case.writeback) written_back += jobs[victim].bytes;
      }
      if (rest > 0) {
        t = std::max(t, victims_done) + static_cast<double>(written_back) / out_rate +
            static_cast<double>(rest) / in_rate;
      }
      run.copy_s +=
          static_cast<double>(job.bytes) / in_rate + static_cast<double>(written_back) / out_rate;
      run.bytes_in += job.bytes;
      run.bytes_out += written_back;
      ++run.swap_ins;
      resident[j] = true;
      used += job.bytes;
      copy_free = data_ready = t;
      times.copied = true;
      times.copy_start_s = start;
      times.copy_end_s = t;
    }
    const double would_start = std::max(compute_free, may_start[j]);
    const double start = std::max(would_start, data_ready);
    run.stall_s += start - would_start;
    run.compute_s += job.compute_s;
    compute_free = released[j] = start + job.compute_s;
    times.compute_start_s = start;
    times.compute_end_s = compute_free;
    run.steps.push_back(times);
    may_start[j] = compute_free + job.idle_s;
    upcoming[j] = next_use[i];
  }
  run.makespan_s = compute_free;
  return run;
}

}  // namespace gpushare::sim
