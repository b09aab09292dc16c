// Policies by name, and the checking of their parameters.
#include <charconv>
#include <cmath>
#include <sstream>

#include "catalog.h"

namespace gpushare::policies {
namespace {

struct Entry {
  std::string_view name;
  std::span<const ParameterSpec> (*parameters)();
  std::unique_ptr<Policy> (*make)(const Parameters&);
};

const Entry kEntries[] = {
    {"harvest", harvest_parameters, make_harvest},
    {"tgs", tgs_parameters, make_tgs},
    {"priority", priority_parameters, make_priority},
    {"fair", fair_parameters, make_fair},
    {"none", none_parameters, make_none},
};

const Entry* find_entry(std::string_view name) {
  for (const Entry& entry : kEntries)
    if (entry.name == name) return &entry;
  return nullptr;
}

std::string joined_names(std::span<const ParameterSpec> specs) {
  std::string names;
  for (const ParameterSpec& spec : specs)
    names += (names.empty() ? "" : ", ") + std::string(spec.name);
  return names.empty() ? "none" : names;
}

}  // namespace

std::string resolve_parameters(std::string_view policy, std::span<const ParameterSpec> specs,
                               const Parameters& given, Parameters& resolved) {
  resolved.clear();
  for (const auto& [name, value] : given) {
    const ParameterSpec* spec = nullptr;
    for (const ParameterSpec& candidate : specs)
      if (candidate.name == name) spec = &candidate;
    std::ostringstream error;
    if (!spec) {
      error << "policy '" << policy << "' has no parameter '" << name
            << "' (it takes: " << joined_names(specs) << ")";
      return error.str();
    }
    if (!std::isfinite(value) || value < spec->min || value > spec->max) {
      error << "policy '" << policy << "' parameter '" << name << "' = " << value
            << " is out of range [" << spec->min << ", " << spec->max << "] (" << spec->meaning
            << ")";
      return error.str();
    }
    if (spec->whole_number && value != std::floor(value)) {
      error << "policy '" << policy << "' parameter '" << name << "' = " << value
            << " must be a whole number (" << spec->meaning << ")";
      return error.str();
    }
    resolved[name] = value;
  }
  for (const ParameterSpec& spec : specs)
    resolved.emplace(std::string(spec.name), spec.default_value);
  return {};
}

// Why a parameter's value cannot be carried out with `capabilities`, or "" when it can.
std::string unsupported(std::span<const ParameterSpec> specs, const Parameters& resolved,
                        Capabilities capabilities) {
  for (const ParameterSpec& spec : specs) {
    const double value = resolved.find(spec.name)->second;
    if (value == spec.default_value) continue;
    if (spec.needs == Needs::kernel_idle_gating && !capabilities.kernel_idle_gating) {
      std::ostringstream error;
      error << spec.name << "=" << value
            << " needs kernel-level idle gating in the shim (holding a launch while production "
               "has kernels in flight), which this build does not have (gpushare-sim models it); "
               "leave "
            << spec.name << " at " << spec.default_value;
      return error.str();
    }
  }
  return {};
}

MakePolicyResult make_policy(std::string_view name, const Parameters& parameters,
                             Capabilities capabilities) {
  const Entry* entry = find_entry(name);
  if (!entry) {
    std::string known;
    for (const Entry& e : kEntries) known += (known.empty() ? "" : ", ") + std::string(e.name);
    return {nullptr, "unknown policy '" + std::string(name) + "' (known: " + known + ")"};
  }
  Parameters resolved;
  std::string error = resolve_parameters(name, entry->parameters(), parameters, resolved);
  if (error.empty()) error = unsupported(entry->parameters(), resolved, capabilities);
  if (!error.empty()) return {nullptr, error};
  return {entry->make(resolved), {}};
}

std::vector<std::string_view> policy_names() {
  std::vector<std::string_view> names;
  for (const Entry& entry : kEntries) names.push_back(entry.name);
  return names;
}

std::vector<ParameterSpec> parameter_specs(std::string_view name) {
  const Entry* entry = find_entry(name);
  if (!entry) return {};
  auto specs = entry->parameters();
  return {specs.begin(), specs.end()};
}

std::string parse_parameters(std::string_view text, Parameters& parameters) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find_first_of(", ", pos);
    const std::string_view pair = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos || equals == 0)
      return "policy parameter '" + std::string(pair) + "' is not name=value";
    const std::string name(pair.substr(0, equals));
    const std::string_view value = pair.substr(equals + 1);
    double number = 0;
    // from_chars, not strtod: the daemon's locale must not change what "0.9" means.
    const auto [value_end, status] =
        std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || status != std::errc() || value_end != value.data() + value.size() ||
        !std::isfinite(number))
      return "policy parameter '" + name + "' has value '" + std::string(value) +
             "', which is not a number";
    parameters[name] = number;
  }
  return {};
}

}  // namespace gpushare::policies
