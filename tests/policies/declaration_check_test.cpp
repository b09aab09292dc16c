// The check of a job's declared memory against what NVML measures (declaration_check.h), one
// clause at a time.
#include "gpushare/policies/declaration_check.h"

#include <gtest/gtest.h>

namespace gpushare::policies {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

DeclarationCheckParams params() {
  DeclarationCheckParams p;
  p.grace = 10s;
  return p;
}

DeclarationSample sample(uint64_t declared, std::optional<uint64_t> measured,
                         std::chrono::milliseconds lasted = 0ms, bool complete = true) {
  DeclarationSample s;
  s.declared_bytes = declared;
  s.measured_bytes = measured;
  s.excess_lasted = lasted;
  s.listing_complete = complete;
  return s;
}

TEST(DeclarationCheck, TheSlackIsTheLargerOf64MiBAndATenth) {
  EXPECT_EQ(declaration_slack(0, params()), 64 * kMiB);
  EXPECT_EQ(declaration_slack(100 * kMiB, params()), 64 * kMiB);
  EXPECT_EQ(declaration_slack(10 * kGiB, params()), kGiB);
  // A tenth of the largest count, give or take the double's rounding of 0.1: no overflow.
  EXPECT_GT(declaration_slack(UINT64_MAX, params()), UINT64_MAX / 11);
  EXPECT_LT(declaration_slack(UINT64_MAX, params()), UINT64_MAX / 9);
}

TEST(DeclarationCheck, DeclaredWithinTheSlackIsBacked) {
  // 10 GiB declared, 9.2 GiB measured: 0.8 GiB short, within the 1 GiB slack, however long.
  auto c = check_declaration(sample(10 * kGiB, 10 * kGiB - 800 * kMiB, 1h), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::backed);
  EXPECT_EQ(c.excess_bytes, 0u);
  EXPECT_EQ(c.unhonoured_bytes, 0u);
  // A small job: 60 MiB declared, nothing measured yet, within the 64 MiB floor.
  EXPECT_EQ(check_declaration(sample(60 * kMiB, 0, 1h), params()).verdict,
            DeclarationVerdict::backed);
}

TEST(DeclarationCheck, MeasuredAboveDeclaredIsFine) {
  // The context, library workspaces and cudaMallocAsync pools are never declared.
  auto c = check_declaration(sample(2 * kGiB, 5 * kGiB, 1h), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::backed);
  EXPECT_EQ(c.unhonoured_bytes, 0u);
}

TEST(DeclarationCheck, OverTheSlackWithinTheGraceIsToleratedButCounted) {
  auto c = check_declaration(sample(16 * kGiB, 1 * kGiB, 10s), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::excess_in_grace);
  // 16 - (1 + 1.6) GiB.
  EXPECT_EQ(c.excess_bytes, 16 * kGiB - kGiB - declaration_slack(16 * kGiB, params()));
  EXPECT_EQ(c.unhonoured_bytes, 0u) << "an allocation in flight keeps all it declared";
}

TEST(DeclarationCheck, OverTheSlackPastTheGraceIsOverDeclaring) {
  auto c = check_declaration(sample(16 * kGiB, 1 * kGiB, 10s + 1ms), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::over_declaring);
  EXPECT_EQ(c.unhonoured_bytes, c.excess_bytes);
  EXPECT_EQ(c.unhonoured_bytes, 16 * kGiB - kGiB - declaration_slack(16 * kGiB, params()))
      << "measured + slack stays honoured";
}

TEST(DeclarationCheck, APidMissingFromACompleteListHoldsNothing) {
  auto c = check_declaration(sample(16 * kGiB, std::nullopt, 11s), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::over_declaring);
  EXPECT_EQ(c.unhonoured_bytes, 16 * kGiB - declaration_slack(16 * kGiB, params()));
}

TEST(DeclarationCheck, APidMissingFromAnIncompleteListDecidesNothing) {
  // Under MPS, or with NVML's pids in another namespace: absence says nothing.
  auto c = check_declaration(sample(16 * kGiB, std::nullopt, 1h, /*complete=*/false), params());
  EXPECT_EQ(c.verdict, DeclarationVerdict::not_measured);
  EXPECT_EQ(c.excess_bytes, 0u);
  EXPECT_EQ(c.unhonoured_bytes, 0u);
  // A listed pid is measured whatever the rest of the list.
  EXPECT_EQ(check_declaration(sample(16 * kGiB, 0, 1h, false), params()).verdict,
            DeclarationVerdict::over_declaring);
}

TEST(DeclarationCheck, AbsurdMeasurementsNeitherOverflowNorPunish) {
  EXPECT_EQ(check_declaration(sample(16 * kGiB, UINT64_MAX, 1h), params()).verdict,
            DeclarationVerdict::backed);
  EXPECT_EQ(check_declaration(sample(0, 0, 1h), params()).verdict, DeclarationVerdict::backed);
}

}  // namespace
}  // namespace gpushare::policies
