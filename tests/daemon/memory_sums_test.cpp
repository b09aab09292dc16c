// A job's per-device memory sums follow its allocations through add, replace and erase
// (admission and the views read the sums, not the allocations).
#include <gtest/gtest.h>

#include <random>

#include "gpushare/protocol/wire.h"
#include "memory_broker.h"
#include "registry.h"

namespace gpushare::daemon {
namespace {

constexpr uint32_t kSwappable = static_cast<uint32_t>(protocol::MemDeclareFlags::swappable);
constexpr uint32_t kReservation = static_cast<uint32_t>(protocol::MemDeclareFlags::reservation);

// The sums the slow way, from the allocations themselves.
void expect_sums_agree(const Job& job) {
  std::map<int, DeviceMemory> expected;
  size_t reservations = 0;
  for (const auto& [key, a] : job.memory) {
    DeviceMemory& d = expected[key.first];
    d.bytes += a.bytes;
    if (a.flags & kSwappable) d.swappable += a.bytes;
    ++d.allocations;
    reservations += (a.flags & kReservation) != 0;
  }
  ASSERT_EQ(job.memory_on.size(), expected.size());
  for (const auto& [device, d] : expected) {
    SCOPED_TRACE(device);
    ASSERT_TRUE(job.memory_on.count(device));
    EXPECT_EQ(job.memory_on.at(device).bytes, d.bytes);
    EXPECT_EQ(job.memory_on.at(device).swappable, d.swappable);
    EXPECT_EQ(job.memory_on.at(device).allocations, d.allocations);
    EXPECT_EQ(job_bytes(job, device), d.bytes);
    EXPECT_EQ(job_swappable(job, device), d.swappable);
    EXPECT_TRUE(holds_memory_on(job, device));
  }
  EXPECT_EQ(job.reservations, reservations);
}

TEST(MemorySums, FollowAddReplaceAndErase) {
  Job job;
  job.set_allocation({0, 1}, {100, 0, 0, 0, {}, false});
  job.set_allocation({0, 2}, {50, 0, kSwappable, 0, {}, false});
  job.set_allocation({3, 1}, {7, 0, kReservation, 0, {}, false});
  expect_sums_agree(job);
  EXPECT_EQ(job.memory_bytes(), 157u);
  job.set_allocation({0, 2}, {80, 0, 0, 0, {}, false});  // replaced: no longer swappable
  expect_sums_agree(job);
  EXPECT_TRUE(job.erase_allocation({3, 1}));
  EXPECT_FALSE(job.erase_allocation({3, 1}));
  expect_sums_agree(job);
  EXPECT_FALSE(holds_memory_on(job, 3));
  EXPECT_EQ(job.devices_in_use(), std::vector<int>{0});
}

TEST(MemorySums, AgreeAfterManyRandomChanges) {
  Job job;
  std::mt19937 random(12);
  for (int i = 0; i < 20000; ++i) {
    Job::AllocationKey key{static_cast<int>(random() % 8), random() % 512};
    if (random() % 3 == 0) {
      job.erase_allocation(key);
    } else {
      uint32_t flags = (random() % 2 ? kSwappable : 0) | (random() % 4 == 0 ? kReservation : 0);
      job.set_allocation(key, {random() % (1u << 20), 0, flags, 0, {}, false});
    }
  }
  expect_sums_agree(job);
  for (auto it = job.memory.begin(); it != job.memory.end();) it = job.erase_allocation(it);
  EXPECT_TRUE(job.memory_on.empty());
  EXPECT_EQ(job.reservations, 0u);
}

// Rotation's prefetch leaves part of a job's swappable memory on the device: what counts as
// resident (and as evictable for production) follows the bytes its shim moved, never more than
// the job's swappable bytes, and a swap-in reserves what it will bring.
TEST(MemorySums, PartlyOnTheDeviceCountsWhatIsThere) {
  constexpr uint64_t kMiB = 1 << 20;
  Registry registry;
  Job& job = registry.add(Job{});
  job.set_allocation({0, 1}, {10 * kMiB, 0, 0, 0, {}, false});
  job.set_allocation({0, 2}, {40 * kMiB, 0, kSwappable, 0, {}, false});
  JobMemory& m = job.memory_state;
  auto expect = [&](uint64_t resident_mib, uint64_t swappable_mib, uint64_t evictable_mib) {
    EXPECT_EQ(job_resident(job, 0), resident_mib * kMiB);
    EXPECT_EQ(job_swappable_resident(job, 0), swappable_mib * kMiB);
    EXPECT_EQ(device_use(registry, 0).resident, resident_mib * kMiB);
    EXPECT_EQ(device_use(registry, 0).evictable, evictable_mib * kMiB);
  };
  {
    SCOPED_TRACE("resident");
    expect(50, 40, 40);
  }
  m.state = SwapState::swapped_out;
  {
    SCOPED_TRACE("swapped out");
    expect(10, 0, 0);
    EXPECT_EQ(job_unmoved(job, 0), 0u);
  }
  m.state = SwapState::swapping_in;
  m.swap_in_bound = 20 * kMiB;
  m.partly_on_device = 0;
  {
    SCOPED_TRACE("a prefetch asked for: its bound reserved");
    expect(30, 20, 20);
  }
  m.state = SwapState::prefetched;
  m.swap_in_bound.reset();
  m.partly_on_device = 20 * kMiB;
  {
    SCOPED_TRACE("prefetched");
    expect(30, 20, 20);
  }
  m.state = SwapState::swapping_out;
  {
    SCOPED_TRACE("leaving from prefetched: only what is there leaves");
    expect(30, 20, 0);
    EXPECT_EQ(device_use(registry, 0).leaving, 20 * kMiB);
  }
  m.state = SwapState::swapping_in;
  {
    SCOPED_TRACE("the rest asked for: all of it reserved");
    expect(50, 40, 40);
  }
  m.state = SwapState::prefetched;
  m.partly_on_device = 1000 * kMiB;
  {
    SCOPED_TRACE("an absurd count is worth at most its swappable bytes");
    expect(50, 40, 40);
  }
  m.state = SwapState::swapped_out;
  m.partly_on_device = 15 * kMiB;
  {
    SCOPED_TRACE(
        "swapped out but for what the driver refused to move: on the device, not "
        "evictable (a move would be refused again)");
    expect(25, 15, 0);
    EXPECT_EQ(device_use(registry, 0).leaving, 0u);
    EXPECT_EQ(job_unmoved(job, 0), 15 * kMiB);
  }
}

}  // namespace
}  // namespace gpushare::daemon
