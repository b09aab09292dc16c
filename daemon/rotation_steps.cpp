// The steps towards a rotation decision (rotation_steps.h): static helpers, then one function
// that applies the rules in their order.
#include "rotation_steps.h"

#include <algorithm>

namespace gpushare::daemon {
namespace {

const RotatingJob* find(const std::vector<RotatingJob>& jobs, uint64_t id) {
  for (const RotatingJob& job : jobs)
    if (job.job_id == id) return &job;
  return nullptr;
}

bool moving(const RotatingJob& job) {
  return job.state == SwapState::swapping_in || job.state == SwapState::swapping_out;
}

bool waited_for(const RotatingJob& job) {
  return moving(job) && !job.overdue;
}

bool fits(const RotationRoom& room, uint64_t bytes) {
  return !room.production_waits && room.resident + bytes <= room.capacity;
}

}  // namespace

std::vector<RotationStep> rotation_steps(const policies::RotationDecision& decision,
                                         const std::vector<RotatingJob>& jobs,
                                         const RotationRoom& room) {
  std::vector<RotationStep> steps;
  if (std::any_of(jobs.begin(), jobs.end(), waited_for)) return steps;

  for (uint64_t id : decision.swap_out) {
    const RotatingJob* job = find(jobs, id);
    if (job && (job->state == SwapState::resident || job->state == SwapState::prefetched))
      steps.push_back({RotationStepKind::swap_out, id, job->on_device});
  }
  // The next job holding more than its prefetch may (the job whose turn just ended, when two
  // take turns): a job moves whole to host, so it leaves, to be prefetched again.
  if (const RotatingJob* next = decision.prefetch ? find(jobs, *decision.prefetch) : nullptr;
      next && (next->state == SwapState::resident || next->state == SwapState::prefetched) &&
      next->on_device > decision.prefetch_bytes)
    steps.push_back({RotationStepKind::swap_out, next->job_id, next->on_device});
  if (!steps.empty()) return steps;

  bool all_running = true;
  for (uint64_t id : decision.run) {
    const RotatingJob* job = find(jobs, id);
    if (!job || job->state == SwapState::resident) continue;
    if (moving(*job)) {  // overdue: not asked again, and the prefetch waits for it
      all_running = false;
      break;
    }
    const uint64_t rest = job->swappable - std::min(job->on_device, job->swappable);
    if (job->state == SwapState::prefetched && rest == 0) {
      steps.push_back({RotationStepKind::resume, id, 0});
      continue;
    }
    all_running = false;
    // In the decision's order: a later job does not take the room the first one waits for.
    if (fits(room, rest)) steps.push_back({RotationStepKind::swap_in, id, rest});
    break;
  }
  if (!all_running || !decision.prefetch) return steps;

  // A job prefetched once waits for its turn: a second bounded request would find no allocation
  // that fits the room the first one left.
  const RotatingJob* next = find(jobs, *decision.prefetch);
  if (next && next->state == SwapState::swapped_out && decision.prefetch_bytes > 0 &&
      fits(room, decision.prefetch_bytes))
    steps.push_back({RotationStepKind::prefetch, next->job_id, decision.prefetch_bytes});
  return steps;
}

}  // namespace gpushare::daemon
