#include "connection_table.h"

#include <utility>

namespace gpushare::daemon {

Connection& ConnectionTable::add(Connection c) {
  remove(c.fd);
  count(c, +1);
  const int fd = c.fd;
  return by_fd_.insert_or_assign(fd, std::move(c)).first->second;
}

Connection* ConnectionTable::find(int fd) {
  auto it = by_fd_.find(fd);
  return it == by_fd_.end() ? nullptr : &it->second;
}

void ConnectionTable::set_role(Connection& c, Connection::Role role) {
  count(c, -1);
  c.role = role;
  count(c, +1);
}

bool ConnectionTable::remove(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return false;
  count(it->second, -1);
  by_fd_.erase(it);
  return true;
}

ConnectionCounts ConnectionTable::counts_for(const Peer& peer) const {
  ConnectionCounts counts;
  counts.total = by_fd_.size();
  counts.unregistered = unregistered_;
  if (auto it = by_uid_.find(peer.uid); it != by_uid_.end()) {
    counts.of_uid = it->second.total;
    counts.unregistered_of_uid = it->second.unregistered;
  }
  return counts;
}

std::vector<int> ConnectionTable::quiet(std::chrono::steady_clock::time_point now,
                                        std::chrono::steady_clock::duration timeout) const {
  std::vector<int> fds;
  for (const auto& [fd, c] : by_fd_)
    if (c.role != Connection::Role::shim && now - c.last_active >= timeout) fds.push_back(fd);
  return fds;
}

void ConnectionTable::count(const Connection& c, int delta) {
  UidCounts& u = by_uid_[c.peer.uid];
  const bool unregistered = c.role == Connection::Role::unknown;
  u.total += delta;
  if (unregistered) u.unregistered += delta;
  if (unregistered && !c.admin) unregistered_ += delta;
  if (u.total == 0) by_uid_.erase(c.peer.uid);
}

}  // namespace gpushare::daemon
