#include "socket_io.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gpushare::daemon {
namespace {

sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size(), sizeof addr.sun_path - 1));
  return addr;
}

std::string errno_text(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// True when something accepts connections at `path` (another daemon is running).
bool live_listener(const sockaddr_un& addr) {
  int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return false;
  bool live = connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ||
              errno == EAGAIN;  // a full backlog is still a live listener
  ::close(probe);
  return live;
}

}  // namespace

int listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group,
                std::string* error) {
  error->clear();
  sockaddr_un addr = address_of(path);
  // Run by hand, /run/gpushare may not exist yet (systemd's RuntimeDirectory= makes it).
  std::string folder = path.substr(0, path.rfind('/'));
  if (!folder.empty()) (void)::mkdir(folder.c_str(), 0755);  // EEXIST is the usual case
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = path + " exists and is not a socket";
      return -1;
    }
    if (live_listener(addr)) {
      *error = path + ": another daemon is listening there";
      return -1;
    }
    ::unlink(path.c_str());
  }
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = errno_text("socket");
    return -1;
  }
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    *error = errno_text(("bind " + path).c_str());
    ::close(fd);
    return -1;
  }
  if (!set_socket_access(path, mode, group, error) || listen(fd, SOMAXCONN) != 0) {
    if (error->empty()) *error = errno_text("listen");
    ::close(fd);
    ::unlink(path.c_str());
    return -1;
  }
  return fd;
}

bool set_socket_access(const std::string& path, mode_t mode, std::optional<gid_t> group,
                       std::string* error) {
  if (group && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) {
    *error = errno_text(("chown " + path).c_str());
    return false;
  }
  if (chmod(path.c_str(), mode) != 0) {
    *error = errno_text(("chmod " + path).c_str());
    return false;
  }
  return true;
}

bool peer_identity(int fd, Peer* peer) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  peer->pid = cred.pid;
  peer->uid = cred.uid;
  peer->gid = cred.gid;
  peer->groups.clear();
  std::vector<gid_t> groups(64);
  len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len);
  if (rc != 0 && errno == ERANGE) {  // len now holds the size needed
    groups.resize(len / sizeof(gid_t));
    rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len);
  }
  if (rc == 0) {
    groups.resize(len / sizeof(gid_t));
    peer->groups = std::move(groups);
  }
  return true;
}

}  // namespace gpushare::daemon
