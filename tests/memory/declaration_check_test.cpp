// Declared memory checked against what NVML sees each process hold (daemon/memory_audit.h), end
// to end: the real daemon reads the fake libnvidia-ml.so.1, whose per-process list comes from
// the fake driver's own accounting of what each memory_client really allocated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "memory_test_support.h"

namespace gpushare::testing {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
// Larger than the other memory tests' capacity: the slack is at least 64 MiB, so a lie must be
// bigger than that to show. The fake's memory is allocated lazily: nothing is filled here.
constexpr uint64_t kDevice = 512 * kMiB;
constexpr auto kGrace = 3s;  // long enough that a refusal before it is not a race on a busy host
const std::string kOutOfMemory = "error 2";  // CUDA_ERROR_OUT_OF_MEMORY

nlohmann::json config() {
  return {{"production", {{{"uid", 0}, {"job", "prod*"}}}},
          {"memory",
           {{"capacity", kDevice},
            {"nvml_sample_ms", 100},
            {"declaration_grace_ms",
             std::chrono::duration_cast<std::chrono::milliseconds>(kGrace).count()}}}};
}

struct DeclarationsAgainstNvml : ::testing::Test {
  TempDir dir;
  Daemon daemon{dir, config()};

  // `with_nvml`: the daemon finds the fake libnvidia-ml.so.1, on the clients' fake device.
  void start(bool with_nvml) {
    daemon.extra_env = {{"GPUSHARE_FAKE_DEVICE_FILE", dir / "fake-device"},
                        {"GPUSHARE_FAKE_MEMORY", std::to_string(kDevice)}};
    if (with_nvml) daemon.extra_env["LD_LIBRARY_PATH"] = Artefacts::fake_driver_dir();
    ASSERT_TRUE(daemon.start());
  }

  ChildProcess client(const std::string& job, const std::string& priority) {
    ProbeOptions options = probe_as(job, priority);
    options.extra_env = {{"GPUSHARE_FAKE_MEMORY", std::to_string(kDevice)}};
    options.extra_env.insert_or_assign("GPUSHARE_QUIET", std::string(1, '1'));
    return start_probe(dir, daemon.socket, options);
  }

  // A client that declares `bytes` as committed device memory and allocates nothing: it speaks
  // the protocol itself (its pid is this test's, which holds no memory on the fake device).
  void declare_without_allocating(RawClient& liar, uint64_t bytes) {
    ASSERT_TRUE(liar.connect(daemon.socket));
    int memfd = -1;
    ASSERT_TRUE(liar.register_job("liar", protocol::JobClass::opportunistic, getpid(), &memfd));
    ::close(memfd);
    protocol::MemDeclare m{};
    m.handle = 0x7f0000000000;
    m.bytes = bytes;
    m.flags = static_cast<uint32_t>(protocol::MemDeclareFlags::committed);
    ASSERT_TRUE(liar.send_frame(protocol::MessageType::mem_declare, &m, sizeof m));
    auto answer = liar.receive(5s);
    ASSERT_TRUE(answer) << "no answer to the declaration";
    protocol::MemReply r;
    std::memcpy(&r, answer->data() + sizeof(protocol::FrameHeader), sizeof r);
    ASSERT_EQ(r.status, static_cast<uint32_t>(protocol::MemStatus::admitted));
  }

  uint64_t unhonoured(pid_t pid) {
    return memory_state(daemon.socket, pid).value("unhonoured_bytes", uint64_t{0});
  }
};

// A job declares most of the device and allocates none of it: production is refused at first
// (an allocation may be in flight), and once the excess has lasted past the grace period the
// declarations beyond what the liar holds plus the slack stop counting, and production fits.
TEST_F(DeclarationsAgainstNvml, DeclaredButNeverAllocatedStopsCountingAfterTheGrace) {
  start(/*with_nvml=*/true);
  ChildProcess prod = client("prod", "production");
  ASSERT_TRUE(prod.running());
  ASSERT_TRUE(ok_number(prod.ask("alloc " + std::to_string(16 * kMiB))));  // NVML lists it
  RawClient liar;
  const uint64_t lie = 448 * kMiB;
  ASSERT_NO_FATAL_FAILURE(declare_without_allocating(liar, lie));
  const uint64_t asked = 256 * kMiB;  // fits only without the lie
  EXPECT_EQ(prod.ask("alloc " + std::to_string(asked)), kOutOfMemory) << "within the grace period";

  ASSERT_TRUE(eventually([&] { return unhonoured(getpid()) > 0; }, kGrace + 10s)) << daemon.log();
  auto state = memory_state(daemon.socket, getpid());
  EXPECT_EQ(state.value("measured_bytes", uint64_t{1}), 0u);
  EXPECT_EQ(state.value("unhonoured_bytes", uint64_t{0}), lie - 64 * kMiB)
      << "measured (0) + the slack (64 MiB) stay counted";
  EXPECT_TRUE(ok_number(prod.ask("alloc " + std::to_string(asked)))) << daemon.log();
  EXPECT_TRUE(daemon.wait_for_log("over-declared memory pid=" + std::to_string(getpid())))
      << daemon.log();
  EXPECT_TRUE(daemon.log_contains("declared=" + std::to_string(lie) + " measured=0"));
  // The liar keeps its connection and its declarations: its limit still counts them.
  auto job = job_with_pid(daemon.socket, getpid());
  ASSERT_TRUE(job);
  EXPECT_EQ((*job)["memory_bytes"], lie);
  // Production, honest, keeps all it declared.
  EXPECT_EQ(unhonoured(prod.pid()), 0u);
}

// The same without NVML (no libnvidia-ml.so.1 for the daemon): declarations count as before.
TEST_F(DeclarationsAgainstNvml, WithoutNvmlDeclarationsCountInFull) {
  start(/*with_nvml=*/false);
  // On a host with a real GPU the daemon finds the real libnvidia-ml.so.1, which lists none of
  // the fake's processes: nothing is judged either, and the outcome is the same.
  ASSERT_TRUE(eventually(
      [&] {
        return daemon.log_contains("NVML unavailable") ||
               daemon.log_contains("declarations checked against NVML");
      },
      5s))
      << daemon.log();
  ChildProcess prod = client("prod", "production");
  ASSERT_TRUE(prod.running());
  ASSERT_TRUE(ok_number(prod.ask("alloc " + std::to_string(16 * kMiB))));
  RawClient liar;
  ASSERT_NO_FATAL_FAILURE(declare_without_allocating(liar, 448 * kMiB));
  auto declared = std::chrono::steady_clock::now();
  // Twice the grace period: with NVML, the lie would have stopped counting by then.
  eventually([&] { return std::chrono::steady_clock::now() - declared > 2 * kGrace; }, 3 * kGrace);
  EXPECT_EQ(prod.ask("alloc " + std::to_string(256 * kMiB)), kOutOfMemory);
  auto state = memory_state(daemon.socket, getpid());
  EXPECT_TRUE(state.contains("measured_bytes") && state["measured_bytes"].is_null()) << state;
  EXPECT_EQ(state.value("unhonoured_bytes", uint64_t{1}), 0u);
}

// Honest jobs, opportunistic and production, allocating and freeing: what NVML measures tracks
// what they declare, nothing of it stops counting, and the capacity still holds against them.
TEST_F(DeclarationsAgainstNvml, HonestJobsKeepAllTheyDeclare) {
  start(/*with_nvml=*/true);
  ChildProcess prod = client("prod", "production");
  ChildProcess opp = client("opp", "opportunistic");
  ASSERT_TRUE(prod.running() && opp.running());
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(200 * kMiB))));
  auto freed = ok_number(prod.ask("alloc " + std::to_string(100 * kMiB)));
  ASSERT_TRUE(freed);
  ASSERT_TRUE(ok_number(prod.ask("alloc " + std::to_string(150 * kMiB))));
  ASSERT_EQ(prod.ask("free " + std::to_string(*freed)), "ok");
  auto measured_matches = [&](ChildProcess& c) {
    auto job = job_with_pid(daemon.socket, c.pid());
    if (!job) return false;
    auto m = (*job).value("memory_state", nlohmann::json::object());
    return m.contains("measured_bytes") && m["measured_bytes"] == (*job)["memory_bytes"];
  };
  ASSERT_TRUE(eventually([&] { return measured_matches(prod) && measured_matches(opp); }, 10s))
      << daemon.log();
  auto since = std::chrono::steady_clock::now();
  eventually([&] { return std::chrono::steady_clock::now() - since > 2 * kGrace; }, 3 * kGrace);
  EXPECT_TRUE(measured_matches(prod) && measured_matches(opp));
  EXPECT_EQ(unhonoured(prod.pid()), 0u);
  EXPECT_EQ(unhonoured(opp.pid()), 0u);
  EXPECT_FALSE(daemon.log_contains("over-declared")) << daemon.log();
  // 350 MiB held: 200 MiB more does not fit, for production either (nothing is swappable).
  EXPECT_EQ(prod.ask("alloc " + std::to_string(200 * kMiB)), kOutOfMemory);
}

}  // namespace
}  // namespace gpushare::testing
