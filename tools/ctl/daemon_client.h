// gpusharectl's side of the socket: one JSON request, one JSON reply (docs/protocol.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpushare::ctl {

struct Exchange {
  enum class Outcome { replied, unreachable, protocol_error } outcome = Outcome::unreachable;
  nlohmann::json reply;  // when replied
  std::string error;     // otherwise
};

// Connects to `socket_path`, sends `request`, waits (bounded) for the reply.
Exchange ask_daemon(const std::string& socket_path, const nlohmann::json& request);

}  // namespace gpushare::ctl
