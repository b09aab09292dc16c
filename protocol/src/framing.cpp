#include "gpushare/protocol/framing.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpushare::protocol {
namespace {

SendResult send_iov(int fd, iovec* iov, size_t iov_count, int pass_fd, int flags) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = iov_count;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
  }
  size_t total = 0;
  for (size_t i = 0; i < iov_count; ++i) total += iov[i].iov_len;
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN ? SendResult::would_block : SendResult::failed;
  return static_cast<size_t>(n) == total ? SendResult::sent : SendResult::failed;
}

}  // namespace

int connect_to_daemon(const char* path, int timeout_ms) {
  sockaddr_un addr{};
  if (std::strlen(path) >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);  // also bounds connect()
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

SendResult send_raw_frame(int fd, const FrameHeader& header, const void* payload, size_t length,
                          int flags) {
  iovec iov[2] = {{const_cast<FrameHeader*>(&header), sizeof header},
                  {const_cast<void*>(payload), length}};
  return send_iov(fd, iov, length ? 2 : 1, -1, flags);
}

SendResult send_frame(int fd, MessageType type, const void* payload, size_t length, int pass_fd,
                      int flags) {
  FrameHeader header = make_header(type, static_cast<uint32_t>(length));
  iovec iov[2] = {{&header, sizeof header}, {const_cast<void*>(payload), length}};
  return send_iov(fd, iov, length ? 2 : 1, pass_fd, flags);
}

Received receive_frame(int fd, void* buffer, size_t size, int flags) {
  Received r;
  iovec iov{buffer, size};
  // Room for twice the kept descriptors: the extra ones are closed here and counted; beyond that
  // the kernel discards them and reports MSG_CTRUNC.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2 * kMaxReceivedFds)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  do {
    r.bytes = recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (r.bytes < 0 && errno == EINTR);
  if (r.bytes < 0) {
    r.error = errno;
    return r;
  }
  r.truncated = (msg.msg_flags & MSG_TRUNC) != 0;
  r.control_truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
      if (r.fd_count < kMaxReceivedFds) {
        r.fds[r.fd_count++] = passed;
      } else {
        ::close(passed);
        ++r.fds_dropped;
      }
    }
  }
  return r;
}

int Received::take_first_fd() {
  int first = fd_count > 0 ? fds[0] : -1;
  for (int i = 1; i < fd_count; ++i) ::close(fds[i]);
  for (int& f : fds) f = -1;
  fd_count = 0;
  return first;
}

void Received::close_fds() {
  for (int i = 0; i < fd_count; ++i) ::close(fds[i]);
  for (int& f : fds) f = -1;
  fd_count = 0;
}

}  // namespace gpushare::protocol
