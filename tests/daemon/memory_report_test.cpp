// The memory part of `gpusharectl jobs` for one job (daemon/memory_broker.h: job_memory_report):
// what a job declared, by kind, and its allocation sites, bounded whatever the job declared.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpushare/protocol/wire.h"
#include "memory_broker.h"
#include "memory_config.h"
#include "registry.h"

namespace gpushare::daemon {
namespace {

using Flags = protocol::MemDeclareFlags;

// One job can name as many site ids as it likes (they come from the client): the reply lists the
// largest announced sites, at most kSitesInReply, with a count and the bytes of the others, and
// puts every unannounced id in one "?" entry, so that `jobs` stays small enough to send.
TEST(MemoryReport, SitesAreBoundedWhateverTheJobDeclared) {
  Job job;
  for (uint32_t site = 1; site <= 40; ++site) {
    if (site <= 20) job.memory_state.sites[site] = "train.py:" + std::to_string(site);
    job.set_allocation({0, site}, DeclaredAllocation{.bytes = 1000 + site, .site = site});
  }
  job.set_allocation(
      {0, 100}, DeclaredAllocation{.bytes = 7, .flags = static_cast<uint32_t>(Flags::swappable)});
  const nlohmann::json report = job_memory_report(MemoryConfig{}, job, true);
  ASSERT_EQ(report["sites"].size(), kSitesInReply);
  // The unannounced ids 21..40 share one entry, the largest of all (20 allocations).
  EXPECT_EQ(report["sites"][0]["where"], "?");
  EXPECT_EQ(report["sites"][0]["allocations"], 20);
  EXPECT_EQ(report["sites"][1]["where"], "train.py:20");  // then the largest announced
  EXPECT_EQ(report["sites_omitted"], 21 - kSitesInReply);
  EXPECT_EQ(report["swappable_bytes"], 7);
  EXPECT_EQ(report["limit_bytes"], nullptr);
  EXPECT_FALSE(job_memory_report(MemoryConfig{}, job, false).contains("sites"));
}

}  // namespace
}  // namespace gpushare::daemon
