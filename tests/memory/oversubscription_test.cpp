// Production memory always wins. An opportunistic job holds 0.8 C of managed memory; a
// production job asks for 0.6 C: the production allocation succeeds, the opportunistic job is
// paused and its memory moved to host, and it resumes, its memory back on the device and
// bit-identical, when production frees. Production is admitted as soon as enough has left the
// device (streaming swap-out), and the daemon trusts the shim's progress only as far as it must.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <regex>

#include "fake_device_view.h"
#include "memory_test_support.h"

namespace gpushare::testing {
namespace {

using protocol::kPausedForMemory;

struct Oversubscription : ::testing::Test {
  TempDir dir;
  Daemon daemon{dir, memory_config()};
  void SetUp() override { ASSERT_TRUE(daemon.start()); }
  fake::DeviceView device() const { return fake::DeviceView(dir / "fake-device"); }

  // A swapped-out job is paused at a launch boundary: its launch waits until production frees
  // `production_memory`; then its `held` bytes come back to the device first and the launch runs.
  void expect_paused_until_production_frees(ChildProcess& opp, ChildProcess& prod,
                                            uint64_t production_memory, uint64_t held) {
    ASSERT_TRUE(opp.send_line("launch 1 0"));
    EXPECT_FALSE(opp.read_line(300ms)) << "an opportunistic launch ran while swapped out";
    ASSERT_EQ(prod.ask("free " + std::to_string(production_memory)), "ok");
    auto resumed = opp.read_line(10s);
    ASSERT_TRUE(resumed);
    EXPECT_EQ(*resumed, "ok");
    EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "back on the device";
  }
};

// "block <paused> <residency>" -> is it paused for memory, with its memory on host?
bool swapped_out(ChildProcess& client) {
  std::string b = client.ask("block");
  unsigned paused = 0, residency = 0;
  return std::sscanf(b.c_str(), "block %u %u", &paused, &residency) == 2 &&
         (paused & kPausedForMemory) && residency == 1;
}

TEST_F(Oversubscription, ProductionTakesTheRoomAndOpportunisticResumesBitIdentical) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());

  auto p = ok_number(opp.ask("alloc " + std::to_string(held)));
  ASSERT_TRUE(p);
  ASSERT_EQ(opp.ask("fill " + std::to_string(*p) + " " + std::to_string(held) + " 7"), "ok");
  std::string checksum = opp.ask("checksum " + std::to_string(*p) + " " + std::to_string(held));
  ASSERT_EQ(checksum.rfind("ok ", 0), 0u) << checksum;
  ASSERT_EQ(opp.ask("launch 2 0"), "ok");
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held) << "managed memory, on the device";
  EXPECT_EQ(memory_state(daemon.socket, opp.pid()).value("swappable_bytes", 0u), held);

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
    ASSERT_TRUE(q) << "production must get its memory";
    EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), 0u) << "its memory left the device";
    // Production is admitted on the bytes the shim reports moved (streaming swap-out), which can
    // be a tick before the shim acknowledges the request and the daemon records it.
    EXPECT_TRUE(eventually([&] { return swapped_out(opp); }, 5s));
    EXPECT_TRUE(eventually(
        [&] { return memory_state(daemon.socket, opp.pid()).value("state", "") == "swapped-out"; },
        5s));

    ASSERT_NO_FATAL_FAILURE(expect_paused_until_production_frees(opp, prod, *q, held));
    EXPECT_EQ(opp.ask("checksum " + std::to_string(*p) + " " + std::to_string(held)), checksum)
        << "contents changed in a swap round trip";
  }
  auto state = memory_state(daemon.socket, opp.pid());
  EXPECT_EQ(state.value("state", ""), "resident");
  EXPECT_EQ(state.value("swaps_out", 0), 2);
  EXPECT_EQ(state.value("swaps_in", 0), 2);
  EXPECT_TRUE(daemon.log_contains("swapped-out")) << daemon.log();
}

// A client killed while the daemon waits for it to move its memory leaks nothing: the waiting
// production allocation goes through and the books hold only what is alive.
TEST_F(Oversubscription, ClientKilledMidSwapLeaksNoAccounting) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic");
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());
  ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(held))));

  opp.signal(SIGSTOP);  // it cannot answer the swap request: the swap stays in flight
  ASSERT_TRUE(prod.send_line("alloc " + std::to_string(asked)));
  EXPECT_FALSE(prod.read_line(300ms)) << "production did not wait for the swap-out";
  EXPECT_EQ(memory_state(daemon.socket, opp.pid()).value("state", ""), "swapping-out");
  pid_t opp_pid = opp.pid();
  opp.signal(SIGKILL);
  opp.wait();

  auto answer = prod.read_line(10s);
  ASSERT_TRUE(answer) << daemon.log();
  EXPECT_TRUE(ok_number(*answer)) << *answer << "\n" << daemon.log();
  EXPECT_TRUE(eventually([&] { return !job_with_pid(daemon.socket, opp_pid); }, 5s));
  CtlResult status = run_ctl(daemon.socket, {"status", "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  uint64_t on_device = 0;
  for (const auto& d : status.json["devices"]) on_device += d.value("memory_bytes", uint64_t{0});
  EXPECT_EQ(on_device, asked) << "only production's memory is left in the books";
  auto free_bytes = ok_number(prod.ask("meminfo"));
  ASSERT_TRUE(free_bytes);
  EXPECT_EQ(*free_bytes, kCapacity - asked);
}

// A swap-out requested while the opportunistic job exits, its CUDA driver already shut down (every
// call answers CUDA_ERROR_DEINITIALIZED, as the real driver's do then): nothing moved, so the shim
// neither warns once per allocation nor acknowledges a move the daemon would count as room; the
// waiting production allocation goes through when the job is gone, before the swap timeout.
TEST_F(Oversubscription, ASwapOutAsTheJobExitsWaitsForItsExit) {
  constexpr int kAllocations = 4;
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess opp = start_client(dir, daemon.socket, "opp", "opportunistic",
                                  {{"GPUSHARE_FAKE_EXIT_HOLD_MS", "2000"}});
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());
  for (int i = 0; i < kAllocations; ++i)
    ASSERT_TRUE(ok_number(opp.ask("alloc " + std::to_string(held / kAllocations))));
  ASSERT_EQ(opp.ask("launch 1 0"), "ok");

  ASSERT_TRUE(opp.send_line("exit"));
  ASSERT_TRUE(eventually(
      [&] {
        return read_file(dir / "probe.stderr").find("fake driver: shut down") != std::string::npos;
      },
      5s));
  pid_t opp_pid = opp.pid();
  ASSERT_TRUE(prod.send_line("alloc " + std::to_string(asked)));
  EXPECT_TRUE(eventually(
      [&] { return memory_state(daemon.socket, opp_pid).value("state", "") == "swapping-out"; },
      2s))
      << daemon.log();
  auto answer = prod.read_line(10s);
  ASSERT_TRUE(answer) << daemon.log();
  EXPECT_TRUE(ok_number(*answer)) << *answer << "\n" << daemon.log();
  EXPECT_EQ(opp.wait(), 0);
  EXPECT_FALSE(daemon.log_contains("swapped-out")) << daemon.log();
  EXPECT_FALSE(daemon.log_contains("did not move to host")) << "admitted at the job's exit";
  EXPECT_EQ(read_file(dir / "probe.stderr").find("cannot move"), std::string::npos)
      << read_file(dir / "probe.stderr");
}

// A move the driver refuses (a GPU without concurrent managed access refuses every prefetch):
// the job that cannot move holds 0.45 C, another 0.4 C; production asks for 0.5 C. The daemon
// first asks the larger job; its shim acknowledges what moved (nothing) and what the driver
// refused, the daemon counts that as still on the device, asks the other job, and production is
// admitted once that job's memory has left: its allocation then succeeds on the device. Counting
// the refused move as room (as before) admitted production while the device was full, and its
// allocation failed.
TEST_F(Oversubscription, AMoveTheDriverRefusesIsNotRoomAndTheNextJobMoves) {
  const uint64_t stuck_bytes = kCapacity / 40 * 18, other_bytes = kCapacity / 10 * 4,
                 asked = kCapacity / 10 * 5;
  ChildProcess stuck = start_client(dir, daemon.socket, "stuck", "opportunistic",
                                    {{"GPUSHARE_FAKE_PREFETCH_FAILS", "1000"}});
  ChildProcess other = start_client(dir, daemon.socket, "other", "opportunistic");
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(stuck.running() && other.running() && prod.running());
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(ok_number(stuck.ask("alloc " + std::to_string(stuck_bytes / 2))));
  ASSERT_TRUE(ok_number(other.ask("alloc " + std::to_string(other_bytes))));

  auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
  ASSERT_TRUE(q) << "production must get its memory on the device\n" << daemon.log();
  EXPECT_EQ(device().bytes_of_pid(0, stuck.pid()), stuck_bytes) << "the refused move";
  EXPECT_EQ(device().bytes_of_pid(0, other.pid()), 0u) << "the next job moved";
  EXPECT_TRUE(
      daemon.log_contains("the driver refused to move " + std::to_string(stuck_bytes) + " bytes"))
      << daemon.log();
  EXPECT_FALSE(daemon.log_contains("let through")) << daemon.log();
  // Its memory never left, so bringing it back takes no room: it resumes beside production.
  EXPECT_TRUE(eventually(
      [&] { return memory_state(daemon.socket, stuck.pid()).value("state", "") == "resident"; },
      5s))
      << daemon.log();
  EXPECT_EQ(stuck.ask("launch 1 0"), "ok");
  // One line for the move, not one per allocation.
  const std::string shim_log = read_file(dir / "probe.stderr");
  EXPECT_NE(shim_log.find("cannot move 2 of 2 allocations"), std::string::npos) << shim_log;
}

// Where nothing else can move, waiting for the timeout cannot make the room: the production
// allocation is let through at once, saying why (the driver then decides, as on the GPU, where
// it may evict managed pages).
TEST_F(Oversubscription, WhereNothingElseCanMoveProductionIsLetThroughAtOnce) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  ChildProcess stuck = start_client(dir, daemon.socket, "stuck", "opportunistic",
                                    {{"GPUSHARE_FAKE_PREFETCH_FAILS", "1000"}});
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(stuck.running() && prod.running());
  ASSERT_TRUE(ok_number(stuck.ask("alloc " + std::to_string(held))));

  auto asked_at = std::chrono::steady_clock::now();
  auto answer = prod.ask("alloc " + std::to_string(asked), 20s);
  const double waited_s = seconds_since(asked_at);
  // The fake driver cannot evict: the allocation fails there, as the memory never left.
  EXPECT_EQ(answer.rfind("ok", 0), std::string::npos) << answer;
  EXPECT_LT(waited_s, 2.5) << "waited for the 5 s swap timeout\n" << daemon.log();
  EXPECT_TRUE(daemon.log_contains("no more opportunistic memory can move to host")) << daemon.log();
  EXPECT_FALSE(daemon.log_contains("did not move to host within")) << daemon.log();
}

// Streaming swap-out: production's allocation is admitted once enough of the opportunistic job's
// memory has left the device, not when all of it has. The job holds 0.8 C in 8 allocations and
// each prefetch to host takes kPrefetchDelay in the fake driver; production's 0.6 C fits once 4
// of them (0.4 C) are on host, so it should wait about half of the whole swap-out, which still
// runs to the end (the whole job goes to host, as before).
TEST_F(Oversubscription, ProductionIsAdmittedWhileTheSwapOutStillStreams) {
  constexpr int kAllocations = 8;
  constexpr auto kPrefetchDelay = 200ms;
  const uint64_t each = kCapacity / 10, held = each * kAllocations, asked = kCapacity / 10 * 6;
  ChildProcess opp =
      start_client(dir, daemon.socket, "opp", "opportunistic",
                   {{"GPUSHARE_FAKE_PREFETCH_DELAY_US",
                     std::to_string(std::chrono::microseconds(kPrefetchDelay).count())}});
  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(opp.running() && prod.running());

  std::vector<std::pair<uint64_t, std::string>> buffers;  // pointer, checksum
  for (int i = 0; i < kAllocations; ++i) {
    auto p = ok_number(opp.ask("alloc " + std::to_string(each)));
    ASSERT_TRUE(p);
    std::string range = std::to_string(*p) + " " + std::to_string(each);
    ASSERT_EQ(opp.ask("fill " + range + " " + std::to_string(i + 1)), "ok");
    std::string checksum = opp.ask("checksum " + range);
    ASSERT_EQ(checksum.rfind("ok ", 0), 0u) << checksum;
    buffers.emplace_back(*p, checksum);
  }
  ASSERT_EQ(opp.ask("launch 2 0"), "ok");
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), held);

  auto asked_at = std::chrono::steady_clock::now();
  auto q = ok_number(prod.ask("alloc " + std::to_string(asked), 20s));
  double waited_ms = seconds_since(asked_at) * 1e3;
  ASSERT_TRUE(q) << "production must get its memory";

  // The whole swap-out still happens; its duration as the shim measured it, from the daemon's log.
  const std::string done = "swapped-out pid=" + std::to_string(opp.pid());
  ASSERT_TRUE(daemon.wait_for_log(done, 20s)) << daemon.log();
  std::smatch m;
  std::string log = daemon.log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex(done + R"( .* in ([0-9.]+) ms)"))) << log;
  double swap_ms = std::stod(m[1]);
  const double delay_ms = std::chrono::duration<double, std::milli>(kPrefetchDelay).count();
  EXPECT_GE(swap_ms, kAllocations * delay_ms) << "every allocation went through the slow prefetch";
  RecordProperty("waited_ms", std::to_string(waited_ms));
  RecordProperty("swap_ms", std::to_string(swap_ms));
  // Admitted after about half of it; without streaming it would wait for all of it (and more).
  EXPECT_LT(waited_ms, 0.8 * swap_ms) << "production waited for the whole swap-out\n" << log;
  // The daemon saw it: admitted on room already moved, at least the 0.4 C production needed.
  ASSERT_TRUE(std::regex_search(
      log, m, std::regex(R"(admitted while job=opp id=\d+ swaps out: (\d+) of (\d+) bytes)")))
      << log;
  EXPECT_GE(std::stoull(m[1]), held + asked - kCapacity);
  EXPECT_EQ(std::stoull(m[2]), held);

  EXPECT_TRUE(eventually([&] { return swapped_out(opp); }, 5s));
  EXPECT_EQ(device().bytes_of_pid(0, opp.pid()), 0u) << "all of its memory left the device";
  EXPECT_TRUE(eventually(
      [&] { return memory_state(daemon.socket, opp.pid()).value("state", "") == "swapped-out"; },
      5s))
      << "the daemon records the acknowledgement on its next tick";

  // Paused until production frees; then it resumes with every buffer bit-identical.
  ASSERT_NO_FATAL_FAILURE(expect_paused_until_production_frees(opp, prod, *q, held));
  for (const auto& [pointer, checksum] : buffers)
    EXPECT_EQ(opp.ask("checksum " + std::to_string(pointer) + " " + std::to_string(each)), checksum)
        << "contents changed in a swap round trip";
  auto state = memory_state(daemon.socket, opp.pid());
  EXPECT_EQ(state.value("state", ""), "resident");
  EXPECT_EQ(state.value("swaps_out", 0), 1);
  EXPECT_EQ(state.value("swaps_in", 0), 1);
}

// The progress a shim reports is untrusted: the daemon counts it only for the request it made,
// never beyond the job's swappable memory, and keeps serving everyone else.
TEST_F(Oversubscription, SwapProgressOfAnotherRequestIsIgnoredAndAnyBytesAreClamped) {
  const uint64_t held = kCapacity / 10 * 8, asked = kCapacity / 10 * 6;
  RawClient liar;  // speaks the protocol itself and writes its control block at will
  ASSERT_TRUE(liar.connect(daemon.socket));
  int memfd = -1;
  ASSERT_TRUE(liar.register_job("liar", protocol::JobClass::opportunistic, getpid(), &memfd));
  ASSERT_GE(memfd, 0);
  void* page =
      mmap(nullptr, protocol::kControlBlockSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  ::close(memfd);
  ASSERT_NE(page, MAP_FAILED);
  auto* block = static_cast<protocol::ControlBlock*>(page);
  // 0.8 C of managed memory it says it has (a committed declaration is never refused).
  protocol::MemDeclare m{};
  m.handle = 0x7f0000000000;
  m.bytes = held;
  m.flags = static_cast<uint32_t>(protocol::MemDeclareFlags::swappable) |
            static_cast<uint32_t>(protocol::MemDeclareFlags::committed);
  ASSERT_TRUE(liar.send_frame(protocol::MessageType::mem_declare, &m, sizeof m));
  ASSERT_TRUE(liar.receive(5s)) << "no answer to the declaration";

  ChildProcess prod = start_client(dir, daemon.socket, "prod", "production");
  ASSERT_TRUE(prod.running());
  ASSERT_TRUE(prod.send_line("alloc " + std::to_string(asked)));
  ASSERT_TRUE(eventually([&] { return block->memory_request_seq.load() != 0; }, 5s));
  uint32_t request = block->memory_request_seq.load();
  EXPECT_EQ(block->memory_target.load(), static_cast<uint32_t>(protocol::Residency::host));

  // Everything "moved", but for a request the daemon never made: production keeps waiting.
  block->swap_progress_bytes.store(~uint64_t{0});
  block->swap_progress_seq.store(request + 1);
  EXPECT_FALSE(prod.read_line(300ms)) << "admitted on progress of another request";
  EXPECT_EQ(memory_state(daemon.socket, getpid()).value("moved_bytes", uint64_t{1}), 0u);

  // The same absurd count for the request in force: worth at most the job's swappable memory.
  block->swap_progress_seq.store(request);
  auto answer = prod.read_line(4s);  // well inside memory.swap_timeout_ms (5 s), which lets through
  ASSERT_TRUE(answer) << daemon.log();
  EXPECT_TRUE(ok_number(*answer)) << *answer;
  EXPECT_FALSE(daemon.log_contains("did not move to host")) << "let through by the timeout";
  auto state = memory_state(daemon.socket, getpid());
  EXPECT_EQ(state.value("state", ""), "swapping-out") << "it never acknowledged the request";
  EXPECT_EQ(state.value("moved_bytes", uint64_t{0}), held);
  auto free_bytes = ok_number(prod.ask("meminfo"));
  ASSERT_TRUE(free_bytes);
  EXPECT_EQ(*free_bytes, kCapacity - asked) << "no underflow in production's view";
  munmap(page, protocol::kControlBlockSize);
}

}  // namespace
}  // namespace gpushare::testing
