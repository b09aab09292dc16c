// The memory commands alone (daemon/memory_service.h): declarations admitted, refused or deferred
// against a configured capacity, over a registry of jobs built here, with hooks that record what
// the service asked of the rest of the daemon (answers sent, clients dropped). The jobs' control
// blocks are real (memfds): the test plays the shims' part of a move to host by writing the
// acknowledgement into the block, as the shim's swap thread does.
#include "memory_service.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "registry_jobs.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;
using protocol::MemDeclareFlags;
using protocol::MemStatus;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kCapacity = 100 * kMiB;

// The log lines written while it lives: the default logger is replaced, then restored.
class LogLines {
 public:
  LogLines() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("memory_service_test", sink));
  }
  ~LogLines() { spdlog::set_default_logger(previous_); }
  bool contain(const std::string& part) const {
    return text_.str().find(part) != std::string::npos;
  }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_ = spdlog::default_logger();
  std::ostringstream text_;
};

struct Answer {
  int fd;
  MemStatus status;
};

struct Memory {
  Memory() {
    CapacitySpec capacity;
    capacity.bytes = kCapacity;
    config.memory.capacity = capacity;
  }
  MemoryService make() {
    return MemoryService(
        MemoryParts{.config = config,
                    .registry = registry,
                    .counters = counters,
                    .log_limiter = log_limiter},
        MemoryHooks{.reply =
                        [this](Connection& c, const protocol::MemReply& reply) {
                          answers.push_back({c.fd, static_cast<MemStatus>(reply.status)});
                        },
                    .connection =
                        [this](int fd) {
                          auto it = connections.find(fd);
                          return it == connections.end() ? nullptr : &it->second;
                        },
                    .drop = [this](int /*fd*/, const std::string& why) { dropped.push_back(why); },
                    .warn = [](const std::string&, const std::string&) {}});
  }

  // A registered shim's job on connection `fd`, with its control block (created as registration
  // creates it), and the connection the deferred answers look up.
  Job& add_job(JobClass granted, const char* name, int fd) {
    Job job = job_with_block(registry, granted, {0});
    job.connection = fd;
    job.peer.pid = 1000 + fd;
    job.peer.uid = 1000;
    job.name = name;
    Connection& c = connections[fd];
    c.fd = fd;
    c.peer = job.peer;
    c.role = Connection::Role::shim;
    c.job_id = job.id;
    return registry.add(std::move(job));
  }
  Connection& connection_of(const Job& job) { return connections.at(job.connection); }

  size_t refusals() const { return counters.refusals[static_cast<size_t>(Refusal::alloc)]; }

  Config config;
  Registry registry;
  DaemonCounters counters;
  LogLimiter log_limiter;
  std::map<int, Connection> connections;  // by fd
  std::vector<Answer> answers;
  std::vector<std::string> dropped;
};

protocol::MemDeclare declare(uint64_t handle, uint64_t bytes,
                             MemDeclareFlags flags = MemDeclareFlags::none) {
  protocol::MemDeclare m{};
  m.handle = handle;
  m.bytes = bytes;
  m.device = 0;
  m.flags = static_cast<uint32_t>(flags);
  return m;
}

// What the shim's swap thread writes when it has done the daemon's latest request (`unmoved`:
// bytes the driver refused to move to host).
void acknowledge_move(Job& job, uint64_t bytes, uint64_t unmoved = 0) {
  protocol::ControlBlock* b = job.block.page();
  b->swap_bytes.store(bytes);
  b->swap_unmoved_bytes.store(unmoved);
  b->swap_ns.store(1'000'000);
  b->memory_done_seq.store(b->memory_request_seq.load());
}

// An opportunistic job "batch" holding 80 MiB of swappable memory, and a production job "serve"
// whose 60 MiB wait for batch to move to host.
struct WaitingForRoom {
  Job& batch;
  Job& serve;
};
WaitingForRoom production_waiting_for_room(Memory& s, MemoryService& memory) {
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& serve = s.add_job(JobClass::production, "serve", 6);
  memory.admit(s.connection_of(batch), batch,
               declare(0x1000, 80 * kMiB, MemDeclareFlags::swappable));
  memory.admit(s.connection_of(serve), serve, declare(0x2000, 60 * kMiB));
  return {batch, serve};
}

TEST(MemoryService, ADeclarationWithinTheCapacityIsAdmittedAndTheViewsFollow) {
  Memory s;
  MemoryService memory = s.make();
  Job& train = s.add_job(JobClass::production, "train", 5);
  memory.admit(s.connection_of(train), train, declare(0x1000, 30 * kMiB));

  ASSERT_EQ(s.answers.size(), 1u);
  EXPECT_EQ(s.answers[0].fd, 5);
  EXPECT_EQ(s.answers[0].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(train, 0), 30 * kMiB);
  EXPECT_EQ(s.refusals(), 0u);
  // The job's view: the configured capacity, less what it holds.
  const protocol::ControlBlock::MemoryView& view = train.block.page()->memory_views[0];
  EXPECT_EQ(view.device.load(), 0);
  EXPECT_EQ(view.total_bytes.load(), kCapacity);
  EXPECT_EQ(view.free_bytes.load(), kCapacity - 30 * kMiB);
  EXPECT_EQ(memory.broker().capacity(s.config.memory, 0), kCapacity);
}

// Production that fits only without an opportunistic job's movable memory waits (no answer yet)
// while that job is paused and asked to move to host; its acknowledgement, seen at the next tick,
// makes the room and the production allocation is admitted.
TEST(MemoryService, ProductionBeyondWhatFitsWaitsWhileTheOpportunisticJobMovesToHost) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& serve = s.add_job(JobClass::production, "serve", 6);
  memory.admit(s.connection_of(batch), batch,
               declare(0x1000, 80 * kMiB, MemDeclareFlags::swappable));
  ASSERT_EQ(s.answers.size(), 1u);
  ASSERT_EQ(s.answers[0].status, MemStatus::admitted);

  memory.admit(s.connection_of(serve), serve, declare(0x2000, 60 * kMiB));
  EXPECT_EQ(s.answers.size(), 1u);  // deferred
  ASSERT_EQ(memory.broker().pending.size(), 1u);
  EXPECT_EQ(memory.broker().pending[0].job_id, serve.id);
  EXPECT_EQ(batch.memory_state.state, SwapState::swapping_out);
  const protocol::ControlBlock* b = batch.block.page();
  EXPECT_EQ(b->memory_target.load(), static_cast<uint32_t>(protocol::Residency::host));
  EXPECT_NE(b->paused.load() & protocol::kPausedForMemory, 0u);
  EXPECT_EQ(job_bytes(serve, 0), 0u);

  // A tick before the shim answers: still waiting.
  memory.tick(Clock::now());
  EXPECT_EQ(s.answers.size(), 1u);

  acknowledge_move(batch, 80 * kMiB);
  memory.tick(Clock::now());
  EXPECT_EQ(batch.memory_state.state, SwapState::swapped_out);
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].fd, 6);
  EXPECT_EQ(s.answers[1].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(serve, 0), 60 * kMiB);
  EXPECT_TRUE(memory.broker().pending.empty());
  // Production fits beside what is left only on host: the opportunistic job stays there, paused.
  EXPECT_EQ(batch.memory_state.state, SwapState::swapped_out);
  EXPECT_NE(b->paused.load() & protocol::kPausedForMemory, 0u);
}

// A swap-out the driver refused in part: what did not move is still on the device, so it is not
// room; the waiting production allocation asks the next opportunistic job, and is admitted once
// that one has moved. The refused bytes show in the job's report.
TEST(MemoryService, WhatTheDriverRefusedToMoveStaysOnTheDeviceAndTheNextJobIsAsked) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& spare = s.add_job(JobClass::opportunistic, "spare", 6);
  Job& serve = s.add_job(JobClass::production, "serve", 7);
  memory.admit(s.connection_of(batch), batch,
               declare(0x1000, 50 * kMiB, MemDeclareFlags::swappable));
  memory.admit(s.connection_of(spare), spare,
               declare(0x2000, 40 * kMiB, MemDeclareFlags::swappable));
  memory.admit(s.connection_of(serve), serve, declare(0x3000, 50 * kMiB));
  ASSERT_EQ(memory.broker().pending.size(), 1u);
  EXPECT_EQ(batch.memory_state.state, SwapState::swapping_out) << "the largest first";
  EXPECT_EQ(spare.memory_state.state, SwapState::resident) << "enough room without it";

  LogLines log;
  acknowledge_move(batch, 20 * kMiB, /*unmoved=*/30 * kMiB);
  memory.tick(Clock::now());
  EXPECT_EQ(batch.memory_state.state, SwapState::swapped_out);
  EXPECT_EQ(job_resident(batch, 0), 30 * kMiB) << "what did not move is on the device";
  EXPECT_EQ(memory.broker().pending.size(), 1u) << "30 + 40 + 50 MiB do not fit 100";
  EXPECT_EQ(spare.memory_state.state, SwapState::swapping_out) << "the next job is asked";
  EXPECT_TRUE(log.contain("the driver refused to move 31457280 bytes")) << log.text();
  EXPECT_FALSE(log.contain("let through")) << log.text();
  const nlohmann::json report = job_memory_report(s.config.memory, batch, false);
  EXPECT_EQ(report.value("unmoved_bytes", uint64_t{0}), 30 * kMiB);
  EXPECT_EQ(report.value("on_host_bytes", uint64_t{0}), 20 * kMiB);

  acknowledge_move(spare, 40 * kMiB);
  memory.tick(Clock::now());
  ASSERT_EQ(s.answers.size(), 3u);
  EXPECT_EQ(s.answers[2].fd, 7);
  EXPECT_EQ(s.answers[2].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(serve, 0), 50 * kMiB);
  // Beside serve's 50 MiB and batch's 30 still on the device, batch's 20 on host fit again:
  // it comes back first (spare's 40 do not fit), and only those 20 MiB count as the swap-in's.
  EXPECT_EQ(batch.memory_state.state, SwapState::swapping_in);
  EXPECT_TRUE(log.contain("swap-in job=batch id=1 device=0 bytes=20971520")) << log.text();
  EXPECT_EQ(spare.memory_state.state, SwapState::swapped_out);
  EXPECT_FALSE(log.contain("let through")) << log.text();
}

// Where nothing else could move, waiting cannot make the room: the production allocation is
// let through at once (the driver decides), not at memory.swap_timeout_ms.
TEST(MemoryService, WhereNothingElseCanMoveTheWaiterIsLetThroughAtOnceSayingWhy) {
  Memory s;
  MemoryService memory = s.make();
  auto [batch, serve] = production_waiting_for_room(s, memory);
  ASSERT_EQ(memory.broker().pending.size(), 1u);

  LogLines log;
  acknowledge_move(batch, 0, /*unmoved=*/80 * kMiB);
  memory.tick(Clock::now());
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].status, MemStatus::admitted);
  EXPECT_TRUE(log.contain("no more opportunistic memory can move to host")) << log.text();
  EXPECT_FALSE(log.contain("within")) << "not the timeout's line: " << log.text();
}

// An acknowledgement that claims more refused than the job holds is clamped: a shim's counts
// are untrusted.
TEST(MemoryService, RefusedBytesBeyondTheJobsMemoryAreClamped) {
  Memory s;
  MemoryService memory = s.make();
  auto [batch, serve] = production_waiting_for_room(s, memory);
  acknowledge_move(batch, 0, /*unmoved=*/UINT64_MAX);
  memory.tick(Clock::now());
  EXPECT_EQ(job_resident(batch, 0), 80 * kMiB);
  EXPECT_EQ(job_memory_report(s.config.memory, batch, false).value("unmoved_bytes", uint64_t{0}),
            80 * kMiB);
}

// Production that would not fit even with every opportunistic job on host is refused at once.
TEST(MemoryService, ProductionBeyondTheCapacityIsRefusedNamingIt) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& serve = s.add_job(JobClass::production, "serve", 6);
  memory.admit(s.connection_of(batch), batch, declare(0x1000, 50 * kMiB));  // cannot move
  LogLines log;
  memory.admit(s.connection_of(serve), serve, declare(0x2000, 60 * kMiB));
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].status, MemStatus::refused);
  EXPECT_TRUE(memory.broker().pending.empty());
  EXPECT_EQ(batch.memory_state.state, SwapState::resident);
  EXPECT_EQ(s.refusals(), 1u);
  EXPECT_TRUE(
      log.contain("production memory would exceed the capacity of 104857600 bytes even "
                  "with every opportunistic job on host"))
      << log.text();
}

// An opportunistic allocation that does not fit: refused when its memory cannot move (the log
// names the full device), admitted with the job moved to host when it can.
TEST(MemoryService, AnOpportunisticDeclarationThatDoesNotFitIsRefusedOrWaitsOnHost) {
  Memory s;
  MemoryService memory = s.make();
  Job& serve = s.add_job(JobClass::production, "serve", 5);
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 6);
  memory.admit(s.connection_of(serve), serve, declare(0x1000, 90 * kMiB));

  LogLines log;
  memory.admit(s.connection_of(batch), batch, declare(0x2000, 20 * kMiB));
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].status, MemStatus::refused);
  EXPECT_EQ(job_bytes(batch, 0), 0u);
  EXPECT_EQ(s.refusals(), 1u);
  EXPECT_EQ(batch.refused_in_a_row, 1u);
  EXPECT_TRUE(
      log.contain("refuse alloc pid=1006 job=batch id=2 device=0 bytes=20971520: the "
                  "device is full (104857600 bytes)"))
      << log.text();
  EXPECT_TRUE(s.dropped.empty());

  memory.admit(s.connection_of(batch), batch,
               declare(0x3000, 20 * kMiB, MemDeclareFlags::swappable));
  ASSERT_EQ(s.answers.size(), 3u);
  EXPECT_EQ(s.answers[2].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(batch, 0), 20 * kMiB);
  EXPECT_EQ(batch.memory_state.state, SwapState::swapping_out);
  EXPECT_EQ(batch.refused_in_a_row, 0u);
  EXPECT_EQ(s.refusals(), 1u);
}

// A job that keeps asking for what it is refused is dropped, with a line saying why.
TEST(MemoryService, AJobRefusedTooManyTimesInARowIsDropped) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  LogLines log;  // keeps the refusals out of the test's output
  for (int k = 0; k < 500; ++k)
    memory.admit(s.connection_of(batch), batch, declare(0x1000, 200 * kMiB));
  EXPECT_TRUE(s.dropped.empty());
  EXPECT_EQ(s.answers.size(), 500u);
  memory.admit(s.connection_of(batch), batch, declare(0x1000, 200 * kMiB));
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "asked for memory it was refused 500 times in a row");
  EXPECT_EQ(s.answers.size(), 500u);  // the dropped request is not answered
}

// A commit that claims its reservation holds the reservation's room: the two are not counted
// together in the moment before the shim releases the reservation (a tick or more on a busy
// machine), so another job is admitted into what is left meanwhile.
TEST(MemoryService, ACommitTakesItsReservationsRoomNotMoreInTheMomentBeforeItsRelease) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& other = s.add_job(JobClass::opportunistic, "other", 6);
  const uint64_t token = protocol::kReservationTokenBit | 1;
  memory.admit(s.connection_of(batch), batch,
               declare(token, 60 * kMiB, MemDeclareFlags::reservation));
  EXPECT_EQ(job_bytes(batch, 0), 60 * kMiB);
  memory.admit(s.connection_of(batch), batch,
               declare(0x1000, 60 * kMiB, MemDeclareFlags::committed));
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(batch, 0), 60 * kMiB) << "the commit and its reservation, counted once";
  EXPECT_EQ(batch.reservations, 1u) << "still waiting for its release";
  EXPECT_EQ(batch.block.page()->memory_views[0].free_bytes.load(), kCapacity - 60 * kMiB);
  EXPECT_EQ(job_memory_report(s.config.memory, batch, false)["reserved_bytes"], 0u);

  memory.admit(s.connection_of(other), other, declare(0x2000, 40 * kMiB));
  EXPECT_EQ(s.answers.back().status, MemStatus::admitted) << "the 40 MiB left";

  ASSERT_TRUE(batch.erase_allocation({0, token}));  // the shim's release of the reservation
  memory.released(batch, 0);
  EXPECT_EQ(job_bytes(batch, 0), 60 * kMiB);
  EXPECT_EQ(batch.reservations, 0u);
  // A second commit finds no reservation to claim: checked like one, and the device is full.
  memory.admit(s.connection_of(batch), batch,
               declare(0x3000, 10 * kMiB, MemDeclareFlags::committed));
  EXPECT_EQ(s.answers.back().status, MemStatus::refused);
}

// A reservation the shim never releases (its allocation never made) stops counting after
// kReservationLifetime, and its room is admitted to others.
TEST(MemoryService, AReservationNeverUsedExpiresAndFreesItsRoom) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& other = s.add_job(JobClass::opportunistic, "other", 6);
  const Clock::time_point declared = Clock::now();
  memory.admit(
      s.connection_of(batch), batch,
      declare(protocol::kReservationTokenBit | 1, 70 * kMiB, MemDeclareFlags::reservation));
  ASSERT_EQ(s.answers.size(), 1u);
  ASSERT_EQ(s.answers[0].status, MemStatus::admitted);
  EXPECT_EQ(batch.reservations, 1u);

  LogLines log;
  memory.admit(s.connection_of(other), other, declare(0x2000, 50 * kMiB));
  EXPECT_EQ(s.answers.back().status, MemStatus::refused);

  // Within its lifetime it still counts.
  memory.expire_reservations(declared + kReservationLifetime - std::chrono::seconds(1));
  EXPECT_EQ(batch.reservations, 1u);
  EXPECT_EQ(job_bytes(batch, 0), 70 * kMiB);

  memory.expire_reservations(Clock::now() + kReservationLifetime);
  EXPECT_EQ(batch.reservations, 0u);
  EXPECT_EQ(job_bytes(batch, 0), 0u);
  EXPECT_TRUE(
      log.contain("expire reservation pid=1005 job=batch id=1 device=0 bytes=73400320: "
                  "not used within 15 s"))
      << log.text();
  // The job's view shows the room again.
  EXPECT_EQ(batch.block.page()->memory_views[0].free_bytes.load(), kCapacity);

  memory.admit(s.connection_of(other), other, declare(0x2000, 50 * kMiB));
  EXPECT_EQ(s.answers.back().status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(other, 0), 50 * kMiB);
}

// A waiting production allocation is served as soon as a release makes the room, even when the
// job asked to move never answers; waiters of a device are served in order.
TEST(MemoryService, AReleaseMakesRoomAndTheWaitersAreServedInOrder) {
  Memory s;
  MemoryService memory = s.make();
  Job& batch = s.add_job(JobClass::opportunistic, "batch", 5);
  Job& serve = s.add_job(JobClass::production, "serve", 6);
  Job& infer = s.add_job(JobClass::production, "infer", 7);
  memory.admit(s.connection_of(batch), batch,
               declare(0x1000, 80 * kMiB, MemDeclareFlags::swappable));
  memory.admit(s.connection_of(serve), serve, declare(0x2000, 40 * kMiB));
  memory.admit(s.connection_of(infer), infer, declare(0x3000, 10 * kMiB));
  // Both wait: the second fits beside what is resident, but waits behind the first.
  ASSERT_EQ(s.answers.size(), 1u);
  ASSERT_EQ(memory.broker().pending.size(), 2u);
  memory.serve_waiters(Clock::now());
  EXPECT_EQ(s.answers.size(), 1u);

  // The opportunistic job frees its allocation (as ShimSessions::on_mem_release does).
  ASSERT_TRUE(batch.erase_allocation({0, 0x1000}));
  memory.released(batch, 0);
  memory.serve_waiters(Clock::now());
  ASSERT_EQ(s.answers.size(), 3u);
  EXPECT_EQ(s.answers[1].fd, 6);
  EXPECT_EQ(s.answers[1].status, MemStatus::admitted);
  EXPECT_EQ(s.answers[2].fd, 7);
  EXPECT_EQ(s.answers[2].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(serve, 0), 40 * kMiB);
  EXPECT_EQ(job_bytes(infer, 0), 10 * kMiB);
  EXPECT_TRUE(memory.broker().pending.empty());
}

// A waiter whose connection went away meanwhile is forgotten, never answered; one still waiting
// past memory.swap_timeout_ms is let through (the driver decides).
TEST(MemoryService, AWaiterIsForgottenWhenItsClientLeftAndLetThroughPastTheTimeout) {
  Memory s;
  s.config.memory.swap_timeout = std::chrono::milliseconds(500);
  MemoryService memory = s.make();
  auto [batch, serve] = production_waiting_for_room(s, memory);
  ASSERT_EQ(memory.broker().pending.size(), 1u);

  LogLines log;
  memory.serve_waiters(Clock::now() + std::chrono::milliseconds(600));
  ASSERT_EQ(s.answers.size(), 2u);
  EXPECT_EQ(s.answers[1].status, MemStatus::admitted);
  EXPECT_EQ(job_bytes(serve, 0), 60 * kMiB);
  EXPECT_TRUE(log.contain("opportunistic memory did not move to host within 500 ms")) << log.text();

  Job& infer = s.add_job(JobClass::production, "infer", 7);
  memory.admit(s.connection_of(infer), infer, declare(0x3000, 30 * kMiB));
  ASSERT_EQ(memory.broker().pending.size(), 1u);
  s.connections.erase(7);  // the client went away; the loop removed its job
  s.registry.remove(infer.id);
  memory.serve_waiters(Clock::now() + std::chrono::seconds(10));
  EXPECT_TRUE(memory.broker().pending.empty());
  EXPECT_EQ(s.answers.size(), 2u);
}

}  // namespace
}  // namespace gpushare::daemon
