// The event loop's side of the connection table (connection_table.h counts, connection_limits.h
// decides): connections that hung up before they were served are reaped before they may crowd
// out live ones, and connections that never register or stay idle are closed after
// kHandshakeTimeout.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <vector>

#include "server.h"

namespace gpushare::daemon {

void Server::forget_connection(int fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  connections_.remove(fd);
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
  for (int fd : connections_.quiet(now, kHandshakeTimeout)) {
    const Connection* c = connections_.find(fd);
    if (!c) continue;
    const bool unregistered = c->role == Connection::Role::unknown;
    drop(fd,
         std::string(unregistered ? "neither registered nor sent a request" : "sent nothing more") +
             " within " + std::to_string(kHandshakeTimeout.count()) + " s");
  }
}

void Server::warn_limited(const std::string& key, const std::string& line) {
  if (log_limiter_.admit(key, Clock::now())) spdlog::warn("{}", line);
}

}  // namespace gpushare::daemon
