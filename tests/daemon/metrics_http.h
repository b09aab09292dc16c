// What the /metrics tests share: a free TCP port and a GET over TCP or a Unix socket.
#pragma once

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <sstream>
#include <string>

namespace gpushare::testing {

// A port nobody listens on now (the kernel's choice for port 0); the caller binds it soon after.
inline int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// GET `path` from 127.0.0.1:port; the body of a 200, else nothing.
inline std::optional<std::string> http_get(int port, const std::string& path,
                                           const httplib::Params& params = {}) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto response = client.Get(path.c_str(), params, httplib::Headers{});
  if (!response || response->status != 200) return std::nullopt;
  return response->body;
}

inline std::optional<std::string> http_get_unix(const std::string& socket_path,
                                                const std::string& path) {
  httplib::Client client(socket_path);
  client.set_address_family(AF_UNIX);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  auto response = client.Get(path.c_str());
  if (!response || response->status != 200) return std::nullopt;
  return response->body;
}

// The value of the first sample line that starts with `series` ("name{labels}"), as text.
inline std::optional<std::string> sample_value(const std::string& exposition,
                                               const std::string& series) {
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);)
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return line.substr(series.size() + 1);
  return std::nullopt;
}

}  // namespace gpushare::testing
