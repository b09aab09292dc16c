#include "daemon_client.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gpushare/protocol/framing.h"

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
  Socket s;
  s.fd = protocol::connect_to_daemon(socket_path.c_str(), kTimeoutSeconds * 1000);
  if (s.fd < 0) {
    const int error = errno;
    x.error = error == ENAMETOOLONG
                  ? "socket path too long: " + socket_path
                  : "cannot connect to gpushared at " + socket_path + ": " + std::strerror(error);
    return x;
  }

  std::string text = request.dump();
  if (protocol::send_frame(s.fd, protocol::MessageType::ctl_request, text.data(), text.size()) !=
      protocol::SendResult::sent) {
    x.error = std::string("cannot send to gpushared: ") + std::strerror(errno);
    return x;
  }

  std::vector<char> frame(sizeof(protocol::FrameHeader) + protocol::kMaxPayload + 1);
  protocol::Received received = protocol::receive_frame(s.fd, frame.data(), frame.size());
  received.close_fds();  // the daemon sends none with a ctl reply
  const ssize_t n = received.bytes;
  if (n <= 0) {
    x.error = n == 0 ? "gpushared closed the connection without a reply"
                     : std::string("no reply from gpushared: ") + std::strerror(received.error);
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
