#include "connection_limits.h"

#include <algorithm>

namespace gpushare::daemon {

ConnectionLimits ConnectionLimits::for_max_clients(size_t max_clients) {
  ConnectionLimits l;
  l.total = max_clients;
  // 1/16 of the table, 1..16 slots; none when the table is tiny (max_clients < 4).
  l.reserved_for_admin = max_clients < 4 ? 0 : std::clamp<size_t>(max_clients / 16, 1, 16);
  size_t open = max_clients - l.reserved_for_admin;
  l.per_uid = std::max<size_t>(1, open / 4);
  l.unregistered = std::max<size_t>(1, open / 4);
  l.unregistered_per_uid = std::min(l.per_uid, std::clamp<size_t>(l.per_uid / 8, 4, 32));
  return l;
}

std::optional<std::string> refuse_connection(const ConnectionLimits& limits,
                                             const ConnectionCounts& counts, bool admin) {
  if (counts.total >= limits.total)
    return "max_clients (" + std::to_string(limits.total) + ") reached";
  if (admin) return std::nullopt;
  if (counts.total >= limits.total - limits.reserved_for_admin)
    return "the last " + std::to_string(limits.reserved_for_admin) +
           " of max_clients are kept for root and the admin group";
  if (counts.of_uid >= limits.per_uid)
    return "this uid holds " + std::to_string(counts.of_uid) +
           " connections (the most one uid may)";
  if (counts.unregistered_of_uid >= limits.unregistered_per_uid)
    return "this uid has " + std::to_string(counts.unregistered_of_uid) +
           " connections that have not registered yet (the most one uid may)";
  if (counts.unregistered >= limits.unregistered)
    return std::to_string(counts.unregistered) + " connections have not registered yet";
  return std::nullopt;
}

}  // namespace gpushare::daemon
