// Who may take one more connection. The connection table is finite
// (`max_clients`), so one user must not be able to fill it: each uid may hold a share of it, and
// only a few connections that have not registered or asked anything yet; the last slots are kept
// for root and the admin group, so `gpusharectl` of an administrator always gets through. Identity
// is the peer's SO_PEERCRED, never anything the client says.
//
// Pure: the server counts, this decides, and a unit test can drive it with numbers.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace gpushare::daemon {

struct ConnectionLimits {
  size_t total = 1024;               // max_clients
  size_t reserved_for_admin = 16;    // of `total`, kept for root and the admin group
  size_t per_uid = 256;              // connections of one non-admin uid (registered or not)
  size_t unregistered_per_uid = 32;  // of those, not yet registered / answered
  size_t unregistered = 256;         // all non-admin connections not yet registered / answered

  // The defaults derived from max_clients (docs/daemon.md, "Connections").
  static ConnectionLimits for_max_clients(size_t max_clients);
};

// A connection that has neither registered nor sent a ctl request after this long is closed, as
// is a ctl or MPS-query connection idle that long (the ctl sends its request at once and reads
// one reply; a shim registers at once).
inline constexpr std::chrono::seconds kHandshakeTimeout{5};

struct ConnectionCounts {
  size_t total = 0;
  size_t of_uid = 0;               // of the connecting peer's uid
  size_t unregistered = 0;         // of non-admin peers
  size_t unregistered_of_uid = 0;  // of the connecting peer's uid
};

// Why a new connection of a peer (`admin`: root or admin group) must be refused, or nullopt.
std::optional<std::string> refuse_connection(const ConnectionLimits& limits,
                                             const ConnectionCounts& counts, bool admin);

}  // namespace gpushare::daemon
