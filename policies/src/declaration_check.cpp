#include "gpushare/policies/declaration_check.h"

#include <algorithm>
#include <cmath>

namespace gpushare::policies {

const char* declaration_verdict_name(DeclarationVerdict v) {
  switch (v) {
    case DeclarationVerdict::backed:
      return "backed";
    case DeclarationVerdict::excess_in_grace:
      return "excess-in-grace";
    case DeclarationVerdict::over_declaring:
      return "over-declaring";
    case DeclarationVerdict::not_measured:
      return "not-measured";
  }
  return "?";
}

uint64_t declaration_slack(uint64_t declared_bytes, const DeclarationCheckParams& params) {
  double fraction = std::clamp(params.slack_fraction, 0.0, 1.0);
  // Computed in long double: 10 % of a declared count near 2^64 must not overflow a double's
  // conversion back.
  auto share = static_cast<uint64_t>(
      std::floor(static_cast<long double>(declared_bytes) * static_cast<long double>(fraction)));
  return std::max(params.slack_floor_bytes, std::min(share, declared_bytes));
}

DeclarationCheck check_declaration(const DeclarationSample& sample,
                                   const DeclarationCheckParams& params) {
  DeclarationCheck out;
  if (!sample.measured_bytes && !sample.listing_complete) return out;  // not_measured
  uint64_t measured = sample.measured_bytes.value_or(0);
  uint64_t slack = declaration_slack(sample.declared_bytes, params);
  uint64_t backed = measured > UINT64_MAX - slack ? UINT64_MAX : measured + slack;
  if (sample.declared_bytes <= backed) {
    out.verdict = DeclarationVerdict::backed;
    return out;
  }
  out.excess_bytes = sample.declared_bytes - backed;
  if (sample.excess_lasted <= params.grace) {
    out.verdict = DeclarationVerdict::excess_in_grace;
    return out;
  }
  out.verdict = DeclarationVerdict::over_declaring;
  out.unhonoured_bytes = out.excess_bytes;
  return out;
}

}  // namespace gpushare::policies
