// The policies the registry knows: each one's parameter table and its constructor. The
// constructors take parameters already checked against the table, with every default filled in.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gpushare/policies/policy.h"

namespace gpushare::policies {

std::span<const ParameterSpec> harvest_parameters();
std::unique_ptr<Policy> make_harvest(const Parameters& resolved);

std::span<const ParameterSpec> tgs_parameters();
std::unique_ptr<Policy> make_tgs(const Parameters& resolved);

std::span<const ParameterSpec> priority_parameters();
std::unique_ptr<Policy> make_priority(const Parameters& resolved);

std::span<const ParameterSpec> fair_parameters();
std::unique_ptr<Policy> make_fair(const Parameters& resolved);

std::span<const ParameterSpec> none_parameters();
std::unique_ptr<Policy> make_none(const Parameters& resolved);

// Fills `resolved` with `given` plus the defaults of `specs`. Returns an error naming the policy
// and the unknown or out-of-range parameter, or an empty string.
std::string resolve_parameters(std::string_view policy, std::span<const ParameterSpec> specs,
                               const Parameters& given, Parameters& resolved);

}  // namespace gpushare::policies
