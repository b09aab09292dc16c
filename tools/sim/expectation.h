// `--expect` checks on simulated normalized throughput, so a test (or a person tuning a policy) can
// state an ordering with a margin:
//
//   "tgs/train-prod >= none/train-prod + 0.3"
//   "priority/batch-opp/off > 0.8"
//
// A reference is policy/job, optionally /on or /off for the NT while some production job is
// scheduled on, or while none is; policy is the label as given to --policy. The right side may
// add, subtract or multiply a number.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace gpushare::sim {

// Looks up a reference such as "tgs/train-prod/on"; nullopt when it names nothing simulated.
using NtLookup = std::function<std::optional<double>(const std::string& reference)>;

struct ExpectationResult {
  bool holds = false;
  std::string explanation;  // the expression with the values filled in, or what is wrong with it
};

ExpectationResult check_expectation(const std::string& expression, const NtLookup& lookup);

}  // namespace gpushare::sim
