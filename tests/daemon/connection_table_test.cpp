// The connection table alone (daemon/connection_table.h): the counts the connection limits read
// stay right as connections come, register or ask, and go, and quiet connections are found.
#include "connection_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

namespace gpushare::daemon {
namespace {

using namespace std::chrono_literals;
using Role = Connection::Role;

Connection of(int fd, uid_t uid, bool admin = false,
              std::chrono::steady_clock::time_point active = {}) {
  Connection c;
  c.fd = fd;
  c.peer.uid = uid;
  c.admin = admin;
  c.last_active = active;
  return c;
}

Peer uid(uid_t u) {
  Peer p;
  p.uid = u;
  return p;
}

TEST(ConnectionTable, CountsEachUidAndTheUnregistered) {
  ConnectionTable table;
  table.add(of(3, 1000));
  table.add(of(4, 1000));
  table.add(of(5, 2000));
  table.add(of(6, 0, /*admin=*/true));
  ConnectionCounts c = table.counts_for(uid(1000));
  EXPECT_EQ(c.total, 4u);
  EXPECT_EQ(c.of_uid, 2u);
  EXPECT_EQ(c.unregistered_of_uid, 2u);
  EXPECT_EQ(c.unregistered, 3u);  // the admin's connection takes no unregistered slot
  EXPECT_EQ(table.counts_for(uid(3000)).of_uid, 0u);
  EXPECT_EQ(table.counts_for(uid(0)).unregistered_of_uid, 1u);
}

TEST(ConnectionTable, ARegisteredConnectionNoLongerCountsAsUnregistered) {
  ConnectionTable table;
  table.add(of(3, 1000));
  table.add(of(4, 1000));
  table.set_role(*table.find(3), Role::shim);
  table.set_role(*table.find(4), Role::ctl);
  ConnectionCounts c = table.counts_for(uid(1000));
  EXPECT_EQ(c.of_uid, 2u);
  EXPECT_EQ(c.unregistered_of_uid, 0u);
  EXPECT_EQ(c.unregistered, 0u);
  EXPECT_EQ(table.find(3)->role, Role::shim);
}

TEST(ConnectionTable, AConnectionThatGoesTakesItsCountsAlong) {
  ConnectionTable table;
  table.add(of(3, 1000));
  table.add(of(4, 1000));
  table.set_role(*table.find(4), Role::shim);
  EXPECT_TRUE(table.remove(3));
  EXPECT_FALSE(table.remove(3));
  EXPECT_EQ(table.find(3), nullptr);
  ConnectionCounts c = table.counts_for(uid(1000));
  EXPECT_EQ(c.total, 1u);
  EXPECT_EQ(c.of_uid, 1u);
  EXPECT_EQ(c.unregistered, 0u);
  EXPECT_TRUE(table.remove(4));
  EXPECT_EQ(table.counts_for(uid(1000)).of_uid, 0u);
  EXPECT_EQ(table.size(), 0u);
}

// A descriptor the kernel hands out again replaces the connection that had it, counts included.
TEST(ConnectionTable, AReusedDescriptorReplacesTheOldConnection) {
  ConnectionTable table;
  table.add(of(3, 1000));
  table.add(of(3, 2000));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.counts_for(uid(1000)).of_uid, 0u);
  EXPECT_EQ(table.counts_for(uid(2000)).of_uid, 1u);
  EXPECT_EQ(table.counts_for(uid(2000)).unregistered, 1u);
}

TEST(ConnectionTable, QuietConnectionsAreThoseNotShimsSilentForTheTimeout) {
  const auto t0 = std::chrono::steady_clock::time_point{} + 100s;
  ConnectionTable table;
  table.add(of(3, 1000, false, t0));       // never registered
  table.add(of(4, 1000, false, t0));       // a shim: quiet is normal
  table.add(of(5, 1000, false, t0 + 4s));  // recent
  table.add(of(6, 1000, false, t0));       // a ctl that asked nothing more
  table.set_role(*table.find(4), Role::shim);
  table.set_role(*table.find(6), Role::ctl);
  std::vector<int> quiet = table.quiet(t0 + 5s, kHandshakeTimeout);
  std::sort(quiet.begin(), quiet.end());
  EXPECT_EQ(quiet, (std::vector<int>{3, 6}));
}

}  // namespace
}  // namespace gpushare::daemon
