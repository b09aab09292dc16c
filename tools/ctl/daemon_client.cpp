#include "daemon_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gpushare/protocol/wire.h"

namespace gpushare::ctl {
namespace {

constexpr int kTimeoutSeconds = 5;

struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Exchange ask_daemon(const std::string& socket_path, const nlohmann::json& request) {
  Exchange x;
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) {
    x.error = "socket path too long: " + socket_path;
    return x;
  }
  Socket s;
  s.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  timeval timeout{kTimeoutSeconds, 0};
  setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());
  if (s.fd < 0 || connect(s.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    x.error = "cannot connect to gpushared at " + socket_path + ": " + std::strerror(errno);
    return x;
  }

  std::string text = request.dump();
  protocol::FrameHeader header =
      protocol::make_header(protocol::MessageType::ctl_request, static_cast<uint32_t>(text.size()));
  iovec out[2] = {{&header, sizeof header}, {text.data(), text.size()}};
  msghdr msg{};
  msg.msg_iov = out;
  msg.msg_iovlen = 2;
  if (sendmsg(s.fd, &msg, MSG_NOSIGNAL) < 0) {
    x.error = std::string("cannot send to gpushared: ") + std::strerror(errno);
    return x;
  }

  std::vector<char> frame(sizeof(protocol::FrameHeader) + protocol::kMaxPayload + 1);
  ssize_t n;
  do {
    n = recv(s.fd, frame.data(), frame.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    x.error = n == 0 ? "gpushared closed the connection without a reply"
                     : std::string("no reply from gpushared: ") + std::strerror(errno);
    return x;
  }
  x.outcome = Exchange::Outcome::protocol_error;
  protocol::FrameHeader h{};
  protocol::FrameError e = protocol::check_frame(frame.data(), static_cast<size_t>(n), &h);
  if (e == protocol::FrameError::none &&
      h.type == static_cast<uint16_t>(protocol::MessageType::error)) {
    protocol::ErrorReply error;
    std::memcpy(&error, frame.data() + sizeof h, sizeof error);
    x.error =
        "gpushared: " + std::string(error.message, strnlen(error.message, sizeof error.message));
    return x;
  }
  if (e != protocol::FrameError::none ||
      h.type != static_cast<uint16_t>(protocol::MessageType::ctl_reply)) {
    x.error = std::string("bad reply from gpushared: ") + protocol::describe(e);
    return x;
  }
  x.reply = nlohmann::json::parse(frame.begin() + sizeof h, frame.begin() + n, nullptr, false);
  if (x.reply.is_discarded() || !x.reply.is_object() || !x.reply.contains("ok")) {
    x.error = "gpushared replied with something that is not a JSON reply object";
    return x;
  }
  x.outcome = Exchange::Outcome::replied;
  return x;
}

}  // namespace gpushare::ctl
