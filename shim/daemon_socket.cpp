#include "daemon_socket.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpushare/protocol/framing.h"

namespace gpushare::shim {

int connect_daemon(const char* socket_path, int timeout_ms, const char** why) {
  int fd = protocol::connect_to_daemon(socket_path, timeout_ms);
  if (fd < 0) *why = std::strerror(errno);
  return fd;
}

bool send_message(int fd, protocol::MessageType type, const void* payload, size_t length) {
  return protocol::send_frame(fd, type, payload, length) == protocol::SendResult::sent;
}

bool receive_reply(int fd, protocol::MessageType type, void* payload, size_t length, int* passed_fd,
                   char* error_text, size_t error_size) {
  // The largest reply the shim expects, plus one byte so a longer frame shows as a size error.
  unsigned char frame[sizeof(protocol::FrameHeader) +
                      std::max({sizeof(protocol::RegisterReply), sizeof(protocol::MpsReply),
                                sizeof(protocol::DeviceMap)}) +
                      1];
  protocol::Received r = protocol::receive_frame(fd, frame, sizeof frame);
  const ssize_t n = r.bytes;
  int received_fd = r.take_first_fd();
  if (!passed_fd && received_fd >= 0) {
    ::close(received_fd);
    received_fd = -1;
  }
  protocol::FrameHeader h{};
  bool ok = n > 0 && !r.truncated &&
            protocol::check_frame(frame, static_cast<size_t>(n), &h) == protocol::FrameError::none;
  if (ok && h.type == static_cast<uint16_t>(protocol::MessageType::error) && error_text) {
    protocol::ErrorReply e;
    std::memcpy(&e, frame + sizeof h, sizeof e);
    std::snprintf(error_text, error_size, "%.*s", static_cast<int>(sizeof e.message), e.message);
  }
  if (!ok || h.type != static_cast<uint16_t>(type) || h.length != length) {
    if (received_fd >= 0) ::close(received_fd);
    return false;
  }
  std::memcpy(payload, frame + sizeof h, length);
  if (passed_fd) *passed_fd = received_fd;
  return true;
}

bool wait_for_reply(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

uint64_t socket_inode(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace gpushare::shim
