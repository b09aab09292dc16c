// Rotating residency (rotation.h). The decision is composed in four steps: the budget (capacity
// less production, so production's memory is never a candidate), the order (swap_order.h for the
// thesis weight, or FIFO, or a fixed list), the head (the current job while its turn lasts, else
// its successor in the cycle) and, from the head, the resident set (the prefix of the order that
// fits), the prefetch (the next job, as much of it as the room left allows) and the swap-outs.
#include "gpushare/policies/rotation.h"

#include <algorithm>

#include "gpushare/policies/swap_order.h"

namespace gpushare::policies {
namespace {

// The share of the budget (1/16) a prefetch leaves free for the running jobs' new allocations.
constexpr uint64_t kPrefetchHeadroom = 16;

std::vector<uint64_t> fifo_order(std::vector<RotationJob> jobs) {
  std::sort(jobs.begin(), jobs.end(), [](const RotationJob& a, const RotationJob& b) {
    if (a.arrival != b.arrival) return a.arrival < b.arrival;
    return a.job_id < b.job_id;
  });
  std::vector<uint64_t> order;
  for (const RotationJob& job : jobs) order.push_back(job.job_id);
  return order;
}

bool contains(const std::vector<uint64_t>& ids, uint64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

const RotationJob* find_job(const std::vector<RotationJob>& jobs, uint64_t id) {
  for (const RotationJob& job : jobs)
    if (job.job_id == id) return &job;
  return nullptr;
}

// Where in `order` the turn is: the current job while its turn lasts; after it, the next job of the
// cycle. A current job that has left hands the turn to the first job after it in the previous
// order that is still here, so FIFO keeps its place in the cycle when a job finishes.
size_t head_index(const std::vector<uint64_t>& order, const RotationState& state, bool turn_over) {
  if (!state.current) return 0;
  auto at = std::find(order.begin(), order.end(), *state.current);
  if (at != order.end()) {
    const size_t index = static_cast<size_t>(at - order.begin());
    return turn_over ? (index + 1) % order.size() : index;
  }
  const auto& previous = state.previous_order;
  auto was = std::find(previous.begin(), previous.end(), *state.current);
  if (was == previous.end()) return 0;
  for (size_t step = 1; step < previous.size(); ++step) {
    const uint64_t id =
        previous[(static_cast<size_t>(was - previous.begin()) + step) % previous.size()];
    auto now = std::find(order.begin(), order.end(), id);
    if (now != order.end()) return static_cast<size_t>(now - order.begin());
  }
  return 0;
}

double turn_length(const RotationParameters& parameters, const RotationJob* next) {
  const double hide = next ? parameters.turn_per_swap_in * next->swap_in_s : 0;
  return std::max(parameters.min_turn_s, hide);
}

}  // namespace

std::vector<uint64_t> rotation_order(const std::vector<RotationJob>& jobs,
                                     const RotationParameters& parameters) {
  switch (parameters.order) {
    case RotationOrder::weight: {
      std::vector<SwapCandidate> candidates;
      for (const RotationJob& job : jobs)
        candidates.push_back({job.job_id, job.reward, job.swap_in_s});
      return swap_in_order(std::move(candidates));
    }
    case RotationOrder::fixed: {
      std::vector<uint64_t> order;
      for (uint64_t id : parameters.fixed_order)
        if (find_job(jobs, id) && !contains(order, id)) order.push_back(id);
      for (uint64_t id : fifo_order(jobs))
        if (!contains(order, id)) order.push_back(id);
      return order;
    }
    case RotationOrder::fifo:
      break;
  }
  return fifo_order(jobs);
}

RotationDecision decide_rotation(const RotationState& state, const RotationParameters& parameters) {
  RotationDecision decision;
  decision.budget_bytes = state.capacity_bytes > state.production_bytes
                              ? state.capacity_bytes - state.production_bytes
                              : 0;
  std::vector<RotationJob> fitting;
  uint64_t total = 0;
  for (const RotationJob& job : state.jobs) {
    if (room_needed(job) > decision.budget_bytes) {
      decision.too_large.push_back(job.job_id);
    } else {
      fitting.push_back(job);
      total += room_needed(job);
    }
  }
  std::vector<uint64_t> order = rotation_order(fitting, parameters);
  if (total <= decision.budget_bytes) {
    decision.order = decision.run = order;
    return decision;
  }
  decision.rotating = true;

  // The current turn's length depends on who comes next, so decide "is it over?" with the
  // successor the current job had.
  bool turn_over = true;
  if (state.current) {
    auto at = std::find(order.begin(), order.end(), *state.current);
    if (at != order.end()) {
      const size_t index = static_cast<size_t>(at - order.begin());
      const RotationJob* next = find_job(fitting, order[(index + 1) % order.size()]);
      turn_over = state.turn_elapsed_s >= turn_length(parameters, next);
    }
  }
  std::rotate(order.begin(),
              order.begin() + static_cast<std::ptrdiff_t>(head_index(order, state, turn_over)),
              order.end());
  decision.order = order;

  uint64_t used = 0;
  size_t next_index = 0;
  bool growing = false;
  while (next_index < order.size()) {
    const RotationJob* job = find_job(fitting, order[next_index]);
    if (used + room_needed(*job) > decision.budget_bytes) break;
    used += room_needed(*job);
    growing = growing || job->growing;
    decision.run.push_back(order[next_index++]);
  }
  // The rotation is on, so at least one job is left outside the resident set.
  const RotationJob* next = find_job(fitting, order[next_index]);
  decision.turn_s = turn_length(parameters, next);
  // Not beside a job still growing: the prefetch would take the room it is about to ask for, and
  // on the H100 its allocation then sent it to host, the prefetch out again for its turn, and the
  // prefetch in again (S7: 417 GB moved in 59 s against 84 GB without prefetch).
  // The prefetch leaves kPrefetchHeadroom of the budget free: a running job's small new
  // allocation that found no room would be made on host, and the job sent there whole (on the
  // H100 a job at its peak still asked for 2 MiB a step; each time it went to host, 9 GB).
  const uint64_t headroom = decision.budget_bytes / kPrefetchHeadroom;
  if (parameters.prefetch && !growing && used + headroom < decision.budget_bytes) {
    decision.prefetch = next->job_id;
    decision.prefetch_bytes = std::min(next->bytes, decision.budget_bytes - used - headroom);
  }
  for (const RotationJob& job : fitting)
    if (job.resident && !contains(decision.run, job.job_id) &&
        !(decision.prefetch && *decision.prefetch == job.job_id))
      decision.swap_out.push_back(job.job_id);
  return decision;
}

}  // namespace gpushare::policies
