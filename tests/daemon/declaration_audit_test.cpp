// Declarations checked against NVML's process list (daemon/memory_audit.h, nvml_usage.h) with
// made-up readings: when absence from the list counts as holding nothing (never under MPS, never
// while no job's pid has been found), how the excess is spread over devices, and what admission
// then counts (device_use).
#include <gtest/gtest.h>

#include <cstring>

#include "gpushare/protocol/wire.h"
#include "memory_audit.h"
#include "memory_broker.h"
#include "nvml_usage.h"
#include "registry.h"

namespace gpushare::daemon {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint32_t kSwappable = static_cast<uint32_t>(protocol::MemDeclareFlags::swappable);

struct AuditOfDeclarations : ::testing::Test {
  Registry registry;
  DeclarationAudit audit;
  LogLimiter log_limiter;
  policies::DeclarationCheckParams params;
  Clock::time_point t0 = Clock::now();

  void SetUp() override { params.grace = 10s; }

  Job& add_job(pid_t pid, protocol::JobClass granted = protocol::JobClass::opportunistic) {
    Job job;
    job.id = registry.next_id();
    job.peer.pid = pid;
    job.granted = granted;
    return registry.add(std::move(job));
  }
  static void declare(Job& job, int device, uint64_t handle, uint64_t bytes, uint32_t flags = 0) {
    DeclaredAllocation a;
    a.bytes = bytes;
    a.flags = flags;
    job.set_allocation({device, handle}, a);
  }
  // One reading taken at `at`, applied twice a grace period apart so that any excess is past it.
  bool apply(const NvmlReading& reading, Clock::time_point at) {
    return audit.apply(registry, reading, params, at, log_limiter);
  }
  bool apply_past_grace(const NvmlReading& reading) {
    apply(reading, t0);
    return apply(reading, t0 + params.grace + 1s);
  }
};

NvmlReading listing(std::vector<ProcessUse> processes, bool mps_server = false) {
  NvmlReading r;
  r.devices.push_back(DeviceProcesses{0, std::move(processes), mps_server});
  return r;
}

TEST_F(AuditOfDeclarations, AJobMissingFromATrustedListHoldsNothing) {
  Job& honest = add_job(100);
  declare(honest, 0, 1, 256 * kMiB);
  Job& liar = add_job(200);
  declare(liar, 0, 1, 1024 * kMiB);
  NvmlReading r = listing({{100, 300 * kMiB}});
  EXPECT_FALSE(apply(r, t0)) << "within the grace period nothing changes";
  EXPECT_TRUE(apply(r, t0 + 11s));
  EXPECT_EQ(job_unhonoured(liar, 0), 1024 * kMiB - policies::declaration_slack(1024 * kMiB, params))
      << "measured (nothing) + the slack, a tenth of what it declared, stay counted";
  EXPECT_EQ(job_unhonoured(honest, 0), 0u);
  EXPECT_EQ(liar.memory_state.measured_bytes, 0u);
  EXPECT_EQ(honest.memory_state.measured_bytes, 300 * kMiB);
  EXPECT_EQ(device_use(registry, 0).resident, 256 * kMiB + 1024 * kMiB - job_unhonoured(liar, 0));
}

TEST_F(AuditOfDeclarations, UnderMpsAbsenceDecidesNothing) {
  Job& client = add_job(200);
  declare(client, 0, 1, 1024 * kMiB);
  Job& other = add_job(100);
  declare(other, 0, 1, 128 * kMiB);
  // NVML lists the MPS server (pid 50) instead of the client; another job is listed.
  NvmlReading r = listing({{50, 1100 * kMiB}, {100, 128 * kMiB}}, /*mps_server=*/true);
  EXPECT_FALSE(apply_past_grace(r));
  EXPECT_EQ(job_unhonoured(client, 0), 0u);
  EXPECT_FALSE(client.memory_state.measured_bytes) << "not measured";
  EXPECT_FALSE(audit.listing_trusted());
  // Nor is a client listed under its own pid with less than it declared: the server holds it.
  Job& listed = add_job(300);
  declare(listed, 0, 1, 1024 * kMiB);
  EXPECT_FALSE(apply(listing({{50, 2100 * kMiB}, {300, 0}}, true), t0 + 30s));
  EXPECT_EQ(job_unhonoured(listed, 0), 0u);
}

TEST_F(AuditOfDeclarations, WithNoJobPidEverListedAbsenceDecidesNothing) {
  // Another pid namespace: NVML's numbers are not the daemon's.
  Job& job = add_job(200);
  declare(job, 0, 1, 1024 * kMiB);
  EXPECT_FALSE(apply_past_grace(listing({{4200, 1100 * kMiB}})));
  EXPECT_EQ(job_unhonoured(job, 0), 0u);
  EXPECT_FALSE(audit.listing_trusted());
}

TEST_F(AuditOfDeclarations, MeasuredAboveDeclaredIsLeftAlone) {
  Job& pools = add_job(100, protocol::JobClass::production);
  declare(pools, 0, 1, 512 * kMiB);
  EXPECT_FALSE(apply_past_grace(listing({{100, 2048 * kMiB}})));
  EXPECT_EQ(job_unhonoured(pools, 0), 0u);
}

TEST_F(AuditOfDeclarations, ASwappedOutJobIsCheckedOnWhatStaysOnTheDevice) {
  Job& seen = add_job(100);
  declare(seen, 0, 1, 8 * kMiB);
  Job& job = add_job(300);
  declare(job, 0, 1, 512 * kMiB, kSwappable);  // on host now: not checked
  declare(job, 0, 2, 256 * kMiB);              // device memory it never allocated
  job.memory_state.state = SwapState::swapped_out;
  ASSERT_TRUE(apply_past_grace(listing({{100, 8 * kMiB}})));
  EXPECT_EQ(job_unhonoured(job, 0), 256 * kMiB - 64 * kMiB);
  // What admission counts of it: none of the managed memory (on host), 64 MiB of the rest.
  EXPECT_EQ(device_use(registry, 0).resident, 8 * kMiB + 64 * kMiB);
}

TEST_F(AuditOfDeclarations, SwappableMemoryIsNotChecked) {
  // Managed memory is on the device only once touched, and can be moved to host.
  Job& job = add_job(100, protocol::JobClass::production);
  declare(job, 0, 1, 1024 * kMiB, kSwappable);
  declare(job, 0, 2, 32 * kMiB);
  EXPECT_FALSE(apply_past_grace(listing({{100, 32 * kMiB}})));
  EXPECT_EQ(job_unhonoured(job, 0), 0u);
}

TEST_F(AuditOfDeclarations, TheExcessIsSpreadOverDevicesAndReturnsWhenMemoryIsReallyHeld) {
  Job& liar = add_job(200);
  declare(liar, 0, 1, 300 * kMiB);
  declare(liar, 1, 1, 100 * kMiB);
  Job& seen = add_job(100);
  declare(seen, 0, 1, 8 * kMiB);
  ASSERT_TRUE(apply_past_grace(listing({{100, 8 * kMiB}})));
  uint64_t excess = 400 * kMiB - 64 * kMiB;
  EXPECT_EQ(job_unhonoured(liar, 0) + job_unhonoured(liar, 1), excess);
  EXPECT_EQ(job_unhonoured(liar, 0), excess * 3 / 4);
  // It allocates what it declared: everything counts again at the next reading.
  EXPECT_TRUE(apply(listing({{100, 8 * kMiB}, {200, 400 * kMiB}}), t0 + 12s));
  EXPECT_EQ(job_unhonoured(liar, 0) + job_unhonoured(liar, 1), 0u);
}

TEST_F(AuditOfDeclarations, ReconnectingDoesNotRestartTheGracePeriod) {
  Job& seen = add_job(100);
  declare(seen, 0, 1, 8 * kMiB);
  Job& first = add_job(200);
  declare(first, 0, 1, 512 * kMiB);
  NvmlReading r = listing({{100, 8 * kMiB}});
  apply(r, t0);
  // Its connection closes and the same process registers again, declaring the same.
  registry.remove(first.id);
  Job& again = add_job(200);
  declare(again, 0, 1, 512 * kMiB);
  EXPECT_TRUE(apply(r, t0 + params.grace + 1s));
  EXPECT_GT(job_unhonoured(again, 0), 0u) << "its excess began before it reconnected";
}

TEST_F(AuditOfDeclarations, TwoJobsOfOneProcessShareWhatItHolds) {
  Job& a = add_job(200);
  declare(a, 0, 1, 256 * kMiB);
  Job& b = add_job(200);
  declare(b, 0, 1, 256 * kMiB);
  // 300 MiB held: each job alone would be backed, together they are 148 MiB over (slack 64 MiB).
  ASSERT_TRUE(apply_past_grace(listing({{200, 300 * kMiB}})));
  EXPECT_EQ(job_unhonoured(a, 0) + job_unhonoured(b, 0), 512 * kMiB - 300 * kMiB - 64 * kMiB);
  EXPECT_EQ(job_unhonoured(a, 0), job_unhonoured(b, 0));
}

TEST(NvmlProcessInfos, EntriesAreReadWithTheLibrarysStride) {
  struct V2 {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
  };
  V2 entries[2] = {{11, 5 * kMiB, ~0u, ~0u}, {12, ~0ull, ~0u, ~0u}};
  auto list = parse_process_infos(reinterpret_cast<const uint8_t*>(entries), 2, sizeof(V2));
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].pid, 11u);
  EXPECT_EQ((*list)[0].bytes, 5 * kMiB);
  EXPECT_FALSE((*list)[1].bytes) << "NVML_VALUE_NOT_AVAILABLE";
  // 32-byte entries read as 24: the second "entry" starts in the first one's fifth field.
  uint8_t wide[64] = {};
  uint32_t pid = 11;
  std::memcpy(wide, &pid, 4);
  pid = 12;
  std::memcpy(wide + 32, &pid, 4);
  EXPECT_FALSE(parse_process_infos(wide, 2, 24));
  EXPECT_TRUE(parse_process_infos(wide, 2, 32));
}

TEST(NvmlLibrary, AMissingLibraryIsOneReasonNotAFailure) {
  std::string why;
  EXPECT_EQ(NvmlLibrary::open("libgpushare-no-such-nvml.so.1", &why), nullptr);
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(start_nvml_sampler(std::chrono::milliseconds(0)), nullptr) << "off";
  // Started without the library, the sampler never has a reading and stops at once.
  auto sampler =
      start_nvml_sampler(std::chrono::milliseconds(100), "libgpushare-no-such-nvml.so.1");
  ASSERT_NE(sampler, nullptr);
  uint64_t seen = 0;
  EXPECT_FALSE(sampler->take_new(&seen));
}

}  // namespace
}  // namespace gpushare::daemon
