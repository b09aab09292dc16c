// Weighted max-min sharing of the GPU among the jobs of one class: the `fair` policy, and `tgs`
// for its opportunistic jobs while production idles.
//
// Where every job of the class reports busy time, the share is of GPU time (a launch costs the
// job's measured ns per launch), otherwise of launches. Where every job on the device reports busy
// time, the class's budget for a window is the window less the other classes' busy time; otherwise
// it is the most the class launched in a window lately (a slowly decaying maximum, so that jobs
// released after a pause start from what they did before) plus `headroom`, which is all that
// launch counts tell of the GPU's capacity. The budget is split weighted max-min: a job that does
// not want more than it got keeps what it used plus headroom, and the rest goes to the jobs that
// want more. Quotas are set only where two jobs or more are at work and their weights differ:
// otherwise the GPU's own time-slicing already gives what the weights ask.
#pragma once

#include <map>

#include "gpushare/policies/policy.h"
#include "share.h"

namespace gpushare::policies {

class ClassSharing {
 public:
  explicit ClassSharing(double headroom) : headroom_(headroom) {}

  // Learns from this window's counts. Call once per window, before share().
  void observe(const DeviceObservation& device);
  // Sets `launches` of the gates (one per job of `device`, same order) of the jobs of `job_class`.
  // A class of one job is left as it is: nobody to share with.
  void share(const DeviceObservation& device, JobClass job_class, std::vector<Gate>& gates);

 private:
  struct JobState {
    LaunchCost cost;
    double carry = 0;                 // fractional launches carried to the next window
    uint64_t allowance = kUnlimited;  // launches the last gate allowed
  };
  static bool wants_more(const JobObservation& job, const JobState& state);

  double headroom_;
  std::map<uint64_t, JobState> jobs_;
  // The most each class used in a window lately, in the units of its last window (GPU time or
  // launches), for budgets that only usage can tell.
  struct Peak {
    double used = 0;
    bool in_time = false;
  };
  std::map<JobClass, Peak> peaks_;
};

}  // namespace gpushare::policies
