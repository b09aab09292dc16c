#include "gpushare/policies/tick.h"

#include <algorithm>

namespace gpushare::policies {

JobObservation observe(JobHistory& history, const JobCounters& c, uint64_t window_ns) {
  JobObservation o;
  o.job_id = c.job_id;
  o.job_class = c.job_class;
  o.weight = c.weight;
  o.mps_client = c.mps_client;
  o.launches = history.first || c.launches < history.launches ? 0 : c.launches - history.launches;
  o.gate_waits =
      history.first || c.gate_waits < history.gate_waits ? 0 : c.gate_waits - history.gate_waits;
  if (c.in_flight && (c.in_flight_exact || (c.bounded && o.launches > 0)))
    o.in_flight = c.in_flight;
  // Completions: never more than the launches counted, never backwards within a registration,
  // nothing until two samples exist.
  std::optional<uint64_t> now = c.completed_launches;
  if (now) now = std::min(*now, c.launches);
  if (now && history.completed && *now >= *history.completed)
    o.completed = *now - *history.completed;
  history.completed = now;
  o.busy_ns = c.busy_ns;
  if (c.in_flight_ns) o.in_flight_ns = std::min(*c.in_flight_ns, window_ns);
  o.paced_in_flight_ns = c.paced_in_flight_ns;
  history.launches = c.launches;
  history.gate_waits = c.gate_waits;
  history.first = false;
  return o;
}

void CompletionPace::sample(std::optional<uint64_t> completed, uint64_t credited_ns) {
  in_flight_ns_ += credited_ns;
  if (completed && completed != completed_) {
    completed_ = completed;
    in_flight_at_completion_ns_ = in_flight_ns_;
  }
}

std::optional<CompletionPace::Reading> CompletionPace::take() {
  if (!completed_) return std::nullopt;
  const Reading r{.completed = *completed_,
                  .in_flight_ns = in_flight_at_completion_ns_ - taken_ns_};
  taken_ns_ = in_flight_at_completion_ns_;
  return r;
}

JobControl control_for(const Gate& gate, JobClass job_class, uint64_t launches_so_far) {
  const ControlValues v = control_values(gate, launches_so_far);
  const bool production = job_class == JobClass::production;
  return JobControl{.job_id = gate.job_id,
                    .allowance = v.allowance,
                    .paused = v.paused,
                    .max_in_flight = production ? 0 : gate.max_in_flight,
                    .production_idle_only = !production && gate.production_idle_only};
}

DeviceTick tick_device(Policy& policy, const std::vector<JobCounters>& jobs,
                       const std::vector<JobHistory*>& history, uint64_t now_ns,
                       uint64_t window_ns) {
  DeviceTick t;
  t.observation.now_ns = now_ns;
  t.observation.window_ns = window_ns;
  for (size_t i = 0; i < jobs.size() && i < history.size(); ++i)
    t.observation.jobs.push_back(observe(*history[i], jobs[i], window_ns));
  t.gates = policy.decide(t.observation);
  // Gates come in the jobs' order; matched by id all the same, so a policy that reorders cannot
  // hand one job's gate to another.
  for (const Gate& gate : t.gates) {
    for (size_t i = 0; i < t.observation.jobs.size(); ++i) {
      if (t.observation.jobs[i].job_id != gate.job_id) continue;
      t.controls.push_back(control_for(gate, t.observation.jobs[i].job_class, jobs[i].launches));
      break;
    }
  }
  return t;
}

}  // namespace gpushare::policies
