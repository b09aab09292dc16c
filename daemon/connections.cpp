// The connection table's limits (connection_limits.h decides, this counts):
// per-uid and unregistered counts kept as connections come, change role and go; connections
// that hung up before they were served are reaped before they may crowd out live ones; and
// connections that never register or stay idle are closed after kHandshakeTimeout.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <vector>

#include "server.h"

namespace gpushare::daemon {

ConnectionCounts Server::count_for(const Peer& peer) const {
  ConnectionCounts counts;
  counts.total = connections_.size();
  counts.unregistered = unregistered_;
  if (auto it = connections_by_uid_.find(peer.uid); it != connections_by_uid_.end()) {
    counts.of_uid = it->second.total;
    counts.unregistered_of_uid = it->second.unregistered;
  }
  return counts;
}

void Server::count_connection(const Connection& c, int delta) {
  UidConnections& u = connections_by_uid_[c.peer.uid];
  bool unregistered = c.role == Connection::Role::unknown;
  u.total += delta;
  if (unregistered) u.unregistered += delta;
  if (unregistered && !c.admin) unregistered_ += delta;
  if (u.total == 0) connections_by_uid_.erase(c.peer.uid);
}

void Server::set_role(Connection& c, Connection::Role role) {
  count_connection(c, -1);
  c.role = role;
  count_connection(c, +1);
}

void Server::forget_connection(std::unordered_map<int, Connection>::iterator it) {
  count_connection(it->second, -1);
  epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
  ::close(it->first);
  connections_.erase(it);
}

// A burst of connect-and-close fills the listen backlog faster than the loop reads the EOFs: the
// connections that already hung up are closed here, before they count against a live client.
size_t Server::reap_hung_up() {
  std::vector<pollfd> fds;
  fds.reserve(connections_.size());
  for (const auto& [fd, c] : connections_) fds.push_back({fd, POLLRDHUP, 0});
  if (fds.empty() || poll(fds.data(), fds.size(), 0) <= 0) return 0;
  size_t reaped = 0;
  for (const pollfd& p : fds) {
    if (!(p.revents & (POLLHUP | POLLRDHUP | POLLERR))) continue;
    disconnect(p.fd);
    ++reaped;
  }
  return reaped;
}

void Server::close_idle_connections(Clock::time_point now) {
  if (now - last_idle_check_ < std::chrono::seconds(1)) return;
  last_idle_check_ = now;
  std::vector<int> idle;
  for (const auto& [fd, c] : connections_)
    if (c.role != Connection::Role::shim && now - c.last_active >= kHandshakeTimeout)
      idle.push_back(fd);
  for (int fd : idle) {
    bool unregistered = connections_.at(fd).role == Connection::Role::unknown;
    drop(fd,
         std::string(unregistered ? "neither registered nor sent a request" : "sent nothing more") +
             " within " + std::to_string(kHandshakeTimeout.count()) + " s");
  }
}

void Server::warn_limited(const std::string& key, const std::string& line) {
  if (log_limiter_.admit(key, Clock::now())) spdlog::warn("{}", line);
}

}  // namespace gpushare::daemon
