// Step orders from the rotation policy, the thesis-shaped example and generated cases
// (memory_schedules.h).
#include "memory_schedules.h"

#include <cmath>
#include <limits>
#include <random>

namespace gpushare::sim {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// Steps of `job` that fit in `turn_s` (rounded up), none when the turn is 0.
uint32_t steps_in(const MemoryJob& job, double turn_s) {
  const double period = job.compute_s + job.idle_s;
  if (period <= 0) return std::numeric_limits<uint32_t>::max();
  return static_cast<uint32_t>(std::min(std::ceil(turn_s / period), 1e9));
}

// Appends up to `steps[k]` steps of each job in `run`, interleaved, and counts them off.
void append_interleaved(const std::vector<uint64_t>& run, std::vector<uint32_t> steps,
                        std::vector<uint32_t>& remaining, StepOrder& order) {
  for (bool any = true; any;) {
    any = false;
    for (size_t k = 0; k < run.size(); ++k) {
      const size_t job = static_cast<size_t>(run[k]);
      if (steps[k] == 0 || remaining[job] == 0) continue;
      order.push_back(job);
      --steps[k];
      --remaining[job];
      any = true;
    }
  }
}

// Uniform in [low, high) from the engine's raw output, the same on every standard library.
double uniform(std::mt19937_64& random, double low, double high) {
  return low + (high - low) * static_cast<double>(random() >> 11) * 0x1.0p-53;
}

}  // namespace

StepOrder rotation_schedule(const MemoryCase& memory_case,
                            const policies::RotationParameters& parameters) {
  const std::vector<MemoryJob>& jobs = memory_case.jobs;
  std::vector<uint32_t> remaining;
  for (const MemoryJob& job : jobs) remaining.push_back(job.steps);
  policies::RotationState state;
  state.capacity_bytes = memory_case.capacity_bytes;
  state.production_bytes = memory_case.production_bytes;
  std::vector<bool> resident(jobs.size(), false);
  StepOrder order;
  for (;;) {
    state.jobs.clear();
    for (size_t j = 0; j < jobs.size(); ++j)
      if (remaining[j] > 0)
        state.jobs.push_back({j, jobs[j].bytes, job_reward(jobs[j]),
                              job_penalty_s(jobs[j], memory_case), jobs[j].arrival, resident[j]});
    if (state.jobs.empty()) return order;
    const policies::RotationDecision decision = policies::decide_rotation(state, parameters);
    if (decision.run.empty()) return order;  // check_case refuses jobs that can never fit
    std::vector<uint32_t> steps;
    for (uint64_t id : decision.run)
      steps.push_back(decision.rotating ? steps_in(jobs[id], decision.turn_s)
                                        : std::numeric_limits<uint32_t>::max());
    steps[0] = std::max<uint32_t>(steps[0], 1);
    append_interleaved(decision.run, steps, remaining, order);
    resident.assign(jobs.size(), false);
    for (uint64_t id : decision.run) resident[id] = true;
    if (decision.prefetch) resident[*decision.prefetch] = true;
    state.current = decision.run[0];
    state.turn_elapsed_s = std::numeric_limits<double>::infinity();  // the turn was served
    state.previous_order = decision.order;
  }
}

policies::RotationParameters one_step_turns(policies::RotationOrder order, bool prefetch) {
  policies::RotationParameters parameters;
  parameters.order = order;
  parameters.prefetch = prefetch;
  parameters.min_turn_s = 0;
  parameters.turn_per_swap_in = 0;
  return parameters;
}

MemoryCase thesis_shaped_case() {
  MemoryCase memory_case;
  memory_case.host_to_device_bytes_per_s = static_cast<double>(MiB);
  memory_case.device_to_host_bytes_per_s = static_cast<double>(MiB);
  memory_case.capacity_bytes = 600 * MiB;  // two of the four working sets
  // name, compute per step, idle between steps, working set, steps, arrival
  memory_case.jobs = {
      {"A", 150, 50, 250 * MiB, 2, 0},
      {"B", 50, 150, 400 * MiB, 2, 1},
      {"C", 300, 25, 300 * MiB, 2, 2},
      {"D", 400, 50, 150 * MiB, 2, 3},
  };
  return memory_case;
}

MemoryCase generated_case(uint64_t seed, size_t jobs) {
  std::mt19937_64 random(seed);
  MemoryCase memory_case;
  memory_case.host_to_device_bytes_per_s = static_cast<double>(GiB);
  memory_case.device_to_host_bytes_per_s = static_cast<double>(GiB);
  uint64_t total = 0, largest = 0;
  for (size_t j = 0; j < jobs; ++j) {
    MemoryJob job;
    job.name = std::string(1, static_cast<char>('a' + j % 26)) +
               (j >= 26 ? std::to_string(j / 26) : std::string());
    job.compute_s = uniform(random, 1, 10);
    job.idle_s = job.compute_s * uniform(random, 0, 1);
    job.bytes = static_cast<uint64_t>(uniform(random, 2, 8) * static_cast<double>(GiB)) / MiB * MiB;
    job.steps = 2 + static_cast<uint32_t>(random() % 3);
    job.arrival = j;
    total += job.bytes;
    largest = std::max(largest, job.bytes);
    memory_case.jobs.push_back(job);
  }
  const double ratio = uniform(random, 1.5, 2.0);
  memory_case.capacity_bytes =
      std::max(largest, static_cast<uint64_t>(static_cast<double>(total) / ratio));
  return memory_case;
}

}  // namespace gpushare::sim
