// The daemon's open connections and the counts their limits read (connection_limits.h decides
// who may take one more): per uid, and those not yet registered or answered. The table owns no
// file descriptor: the event loop accepts, polls and closes them; the table remembers each
// connection and keeps the counts right as connections come, change role and go.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "authorization.h"
#include "connection_limits.h"

namespace gpushare::daemon {

struct Connection {
  enum class Role { unknown, shim, ctl };
  int fd = -1;
  Peer peer;
  Role role = Role::unknown;
  uint64_t job_id = 0;  // when role == shim
  bool admin = false;   // root or admin_group at connect time: may use the reserved slots
  std::chrono::steady_clock::time_point last_active;  // accepted, or its last frame
};

class ConnectionTable {
 public:
  using Map = std::unordered_map<int, Connection>;

  // Remembers `c` under c.fd (a descriptor already in the table is replaced).
  Connection& add(Connection c);
  // The connection of `fd`, or nullptr.
  Connection* find(int fd);
  // Changes its role; a connection that registers or asks stops counting as unregistered.
  void set_role(Connection& c, Connection::Role role);
  // Forgets the connection of `fd`; false when there was none.
  bool remove(int fd);

  // What the limits read for one more connection of `peer`.
  ConnectionCounts counts_for(const Peer& peer) const;
  size_t size() const { return by_fd_.size(); }
  // The connections that are not shims and have sent nothing for `timeout` by `now`
  // (kHandshakeTimeout: never registered, or a ctl or MPS query gone quiet).
  std::vector<int> quiet(std::chrono::steady_clock::time_point now,
                         std::chrono::steady_clock::duration timeout) const;

  Map::iterator begin() { return by_fd_.begin(); }
  Map::iterator end() { return by_fd_.end(); }
  Map::const_iterator begin() const { return by_fd_.begin(); }
  Map::const_iterator end() const { return by_fd_.end(); }

 private:
  void count(const Connection& c, int delta);

  struct UidCounts {
    size_t total = 0, unregistered = 0;
  };
  Map by_fd_;
  std::unordered_map<uid_t, UidCounts> by_uid_;
  size_t unregistered_ = 0;  // of non-admin peers
};

}  // namespace gpushare::daemon
