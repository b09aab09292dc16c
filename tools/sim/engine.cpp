#include "engine.h"

#include <algorithm>
#include <deque>
#include <queue>

#include "gpushare/policies/tick.h"

namespace gpushare::sim {
namespace {

using policies::kUnlimited;

enum class Cpu {
  ready,       // about to launch the next kernel
  waiting,     // outside its scheduled phases, or not started yet
  gate,        // a launch waits at the gate (pause, allowance or in-flight bound)
  queue_full,  // queue_depth kernels queued: the launch blocks in the driver
  sync,        // waiting for the iteration's kernels to finish
  gap,         // CPU work between iterations
};

struct Job {
  const JobSpec* spec = nullptr;
  bool included = false;
  uint64_t random_state = 0;

  Cpu cpu = Cpu::waiting;
  uint64_t wake_token = 0;  // wake-up events carrying an older token are stale
  uint32_t launched_in_iteration = 0;
  bool counted = false;  // the waiting launch already bumped the counter
  bool waited = false;   // ... and was counted in gate_waits

  // What the shim publishes in its control block.
  uint64_t launches = 0;
  uint64_t gate_waits = 0;
  // What the daemon wrote into it.
  uint64_t allowance = kUnlimited;
  bool paused = false;
  uint32_t max_in_flight = 0;
  bool production_idle_only = false;

  std::deque<uint64_t> queued;  // durations of kernels launched but not started
  uint32_t in_flight = 0;       // queued + running

  policies::JobHistory history;  // the counters at the last tick (policies/tick.h)
  uint64_t window_busy_ns = 0;
  // Time in this window with kernels queued or running (what the daemon's idle relay measures
  // of a production job: JobObservation::in_flight_ns), and since when the current stretch runs.
  uint64_t window_in_flight_ns = 0, in_flight_since = 0;
  // Production's completions over the time they took (JobCounters::paced_in_flight_ns), sampled
  // at every kernel's end as the daemon's relay samples them every 250 µs: the in-flight time of
  // the stretches ended, and of all of them at the last sample.
  policies::CompletionPace pace;
  uint64_t in_flight_ended_ns = 0, in_flight_sampled_ns = 0;
  JobResult result;

  // Kernel durations from splitmix64: the same sequence in every run of this job.
  uint64_t next_kernel_ns() {
    uint64_t z = (random_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53);
    const double factor = 1 + spec->kernel_spread * (2 * unit - 1);
    return std::max<uint64_t>(1,
                              static_cast<uint64_t>(static_cast<double>(spec->kernel_ns) * factor));
  }
};

struct Event {
  enum Kind { wake, kernel_done, tick } kind;
  uint64_t time;
  uint64_t order;  // ties broken by creation order: the run is deterministic
  size_t job;
  uint64_t token;
  bool operator>(const Event& other) const {
    return time != other.time ? time > other.time : order > other.order;
  }
};

class Simulation {
 public:
  Simulation(const Trace& trace, policies::Policy& policy, const std::vector<bool>& included,
             std::ostream* timeline, const std::string& label)
      : trace_(trace), policy_(policy), timeline_(timeline), label_(label) {
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      Job job;
      job.spec = &trace.jobs[i];
      job.included = included[i];
      job.random_state = 0x5eed + i;
      jobs_.push_back(job);
    }
  }

  std::vector<JobResult> run() {
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (jobs_[i].included) wake_at(i, jobs_[i].spec->next_on(0));
    push({Event::tick, trace_.tick_ns, 0, 0, 0});
    while (!events_.empty() && events_.top().time <= trace_.duration_ns) {
      const Event event = events_.top();
      events_.pop();
      now_ = event.time;
      if (event.kind == Event::tick) {
        on_tick();
      } else if (event.kind == Event::kernel_done) {
        on_kernel_done();
      } else if (event.token == jobs_[event.job].wake_token) {
        Job& job = jobs_[event.job];
        if (job.cpu == Cpu::gap) ++job.result.iterations;
        job.cpu = Cpu::ready;
        try_launch(event.job);
      }
    }
    std::vector<JobResult> results;
    for (const Job& job : jobs_) results.push_back(job.result);
    return results;
  }

 private:
  void push(Event event) {
    event.order = next_order_++;
    events_.push(event);
  }

  void wake_at(size_t index, uint64_t time) {
    Job& job = jobs_[index];
    if (time == UINT64_MAX) return;  // never again
    push({Event::wake, time, 0, index, ++job.wake_token});
  }

  // The job's CPU tries to launch its next kernel now.
  void try_launch(size_t index) {
    Job& job = jobs_[index];
    while (job.cpu == Cpu::ready || job.cpu == Cpu::gate || job.cpu == Cpu::queue_full) {
      if (!job.spec->scheduled_on(now_)) {
        job.cpu = Cpu::waiting;
        wake_at(index, job.spec->next_on(now_));
        return;
      }
      if (job.in_flight >= job.spec->queue_depth) {
        job.cpu = Cpu::queue_full;
        return;
      }
      // The shim's gate: the launch counts itself first, then compares its number.
      if (!job.counted) {
        ++job.launches;
        job.counted = true;
      }
      const bool held = job.paused || job.launches > job.allowance ||
                        (job.max_in_flight > 0 && job.in_flight >= job.max_in_flight) ||
                        (job.production_idle_only && production_in_flight_ > 0);
      if (held) {
        if (!job.waited) ++job.gate_waits;
        job.waited = true;
        job.cpu = Cpu::gate;
        return;
      }
      job.counted = job.waited = false;
      job.queued.push_back(job.next_kernel_ns());
      if (job.in_flight++ == 0) job.in_flight_since = now_;
      if (job.spec->job_class == policies::JobClass::production) ++production_in_flight_;
      if (!running_) dispatch();
      if (++job.launched_in_iteration == job.spec->kernels_per_iteration) {
        job.launched_in_iteration = 0;
        job.cpu = Cpu::sync;
        return;
      }
      job.cpu = Cpu::ready;
      if (job.spec->launch_ns > 0) {
        wake_at(index, now_ + job.spec->launch_ns);
        return;
      }
    }
  }

  // Starts the next kernel on the idle engine: the job holding the engine keeps it for its
  // timeslice while others wait, then the next job with queued kernels in turn takes it.
  void dispatch() {
    const size_t n = jobs_.size();
    bool others_waiting = false;
    for (size_t i = 0; i < n; ++i)
      if (i != slice_job_ && !jobs_[i].queued.empty()) others_waiting = true;
    const bool keep = !jobs_[slice_job_].queued.empty() &&
                      (!others_waiting || now_ - slice_start_ < trace_.timeslice_ns);
    if (!keep) {
      size_t next = slice_job_;
      for (size_t step = 1; step <= n; ++step) {
        if (!jobs_[(slice_job_ + step) % n].queued.empty()) {
          next = (slice_job_ + step) % n;
          break;
        }
      }
      if (jobs_[next].queued.empty()) return;  // nothing to run
      slice_job_ = next;
      slice_start_ = now_;
    }
    Job& job = jobs_[slice_job_];
    const uint64_t duration = job.queued.front();
    job.queued.pop_front();
    running_ = true;
    run_start_ = now_;
    push({Event::kernel_done, now_ + duration, 0, slice_job_, 0});
  }

  void on_kernel_done() {
    const size_t index = slice_job_;
    Job& job = jobs_[index];
    job.window_busy_ns += now_ - std::max(run_start_, window_start_);
    running_ = false;
    if (job.spec->job_class == policies::JobClass::production) {
      const uint64_t in_flight_ns = job.in_flight_ended_ns + (now_ - job.in_flight_since);
      job.pace.sample(job.result.kernels + 1, in_flight_ns - job.in_flight_sampled_ns);
      job.in_flight_sampled_ns = in_flight_ns;
    }
    if (--job.in_flight == 0) {
      job.window_in_flight_ns += now_ - std::max(job.in_flight_since, window_start_);
      job.in_flight_ended_ns += now_ - job.in_flight_since;
    }
    if (job.spec->job_class == policies::JobClass::production) --production_in_flight_;
    ++job.result.kernels;
    ++(production_scheduled(trace_, now_) ? job.result.kernels_while_on
                                          : job.result.kernels_while_off);
    if (job.cpu == Cpu::sync && job.in_flight == 0) {
      job.cpu = Cpu::gap;
      wake_at(index, now_ + job.spec->iteration_gap_ns);
    } else if (job.cpu == Cpu::queue_full || job.cpu == Cpu::gate) {
      try_launch(index);
    }
    // Production just went idle: launches held for that may go now.
    if (production_in_flight_ == 0 && job.spec->job_class == policies::JobClass::production)
      for (size_t i = 0; i < jobs_.size(); ++i)
        if (jobs_[i].cpu == Cpu::gate && jobs_[i].production_idle_only) try_launch(i);
    if (!running_) dispatch();
  }

  // The daemon's tick: sample every registered job, let the policy decide, write the gates.
  void on_tick() {
    if (running_) {
      jobs_[slice_job_].window_busy_ns += now_ - std::max(run_start_, window_start_);
    }
    const uint64_t window_ns = now_ - window_start_;
    std::vector<policies::JobCounters> counters;
    std::vector<policies::JobHistory*> history;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Job& job = jobs_[i];
      const JobSpec& spec = *job.spec;
      const bool registered = job.included && now_ >= spec.start_ns &&
                              (spec.stop_ns == 0 || now_ < spec.stop_ns || job.in_flight > 0);
      if (!registered) continue;
      // The counters a control block would hold; policies::tick_device turns them into the
      // window's observation exactly as the daemon's tick does.
      policies::JobCounters c{.job_id = i,
                              .job_class = spec.job_class,
                              .weight = spec.weight,
                              .launches = job.launches,
                              .gate_waits = job.gate_waits};
      if (trace_.report_busy) c.busy_ns = job.window_busy_ns;
      if (trace_.report_in_flight) {
        c.in_flight = job.in_flight;
        c.in_flight_exact = true;
      }
      if (trace_.report_in_flight && spec.job_class == policies::JobClass::production)
        c.in_flight_ns = job.window_in_flight_ns +
                         (job.in_flight > 0 ? now_ - std::max(job.in_flight_since, window_start_)
                                            : 0);
      if (trace_.report_in_flight && spec.job_class == policies::JobClass::production)
        if (std::optional<policies::CompletionPace::Reading> paced = job.pace.take())
          c.paced_in_flight_ns = paced->in_flight_ns;
      counters.push_back(c);
      history.push_back(&job.history);
      if (timeline_)
        *timeline_ << label_ << ',' << static_cast<double>(now_) / 1e9 << ',' << spec.name << ','
                   << static_cast<double>(job.window_busy_ns) / static_cast<double>(window_ns)
                   << '\n';
    }
    const policies::DeviceTick t =
        policies::tick_device(policy_, counters, history, now_, window_ns);
    for (const policies::JobControl& control : t.controls) {
      Job& job = jobs_[control.job_id];
      job.allowance = control.allowance;
      job.paused = control.paused;
      job.max_in_flight = control.max_in_flight;
      job.production_idle_only = control.production_idle_only;
    }
    for (size_t i = 0; i < jobs_.size(); ++i) {
      Job& job = jobs_[i];
      job.window_busy_ns = 0;
      job.window_in_flight_ns = 0;
      job.result.gate_waits = job.gate_waits;
    }
    window_start_ = now_;
    for (size_t i = 0; i < jobs_.size(); ++i)
      if (jobs_[i].cpu == Cpu::gate) try_launch(i);
    push({Event::tick, now_ + trace_.tick_ns, 0, 0, 0});
  }

  const Trace& trace_;
  policies::Policy& policy_;
  std::ostream* timeline_;
  std::string label_;
  std::vector<Job> jobs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t next_order_ = 0;
  uint64_t now_ = 0;
  uint64_t window_start_ = 0;
  // The engine.
  bool running_ = false;
  uint64_t run_start_ = 0;
  size_t slice_job_ = 0;
  uint32_t production_in_flight_ = 0;  // what the shims would publish for idle gating
  uint64_t slice_start_ = 0;
};

}  // namespace

bool production_scheduled(const Trace& trace, uint64_t t) {
  for (const JobSpec& job : trace.jobs)
    if (job.job_class == policies::JobClass::production && job.scheduled_on(t)) return true;
  return false;
}

std::vector<JobResult> simulate(const Trace& trace, policies::Policy& policy,
                                const std::vector<bool>& included, std::ostream* timeline,
                                const std::string& label) {
  return Simulation(trace, policy, included, timeline, label).run();
}

}  // namespace gpushare::sim
