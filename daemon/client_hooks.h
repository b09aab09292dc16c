// What a session component (shim_sessions.h, device_sessions.h, mps_sessions.h,
// memory_service.h) asks of the event loop about a client: the same three calls for each, so
// their shapes are written once here and the server builds each once (Server::client_hooks).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "connection_table.h"
#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {

// Sends one frame; false when the client is gone or was dropped meanwhile.
using ReplyFrame = std::function<bool(Connection& c, protocol::MessageType type,
                                      const void* payload, size_t length)>;
// Drops the client with one log line naming what was wrong.
using DropClient = std::function<void(int fd, const std::string& why)>;
// A warning keyed by client and reason, rate-limited (log_limiter.h).
using WarnLimited = std::function<void(const std::string& key, const std::string& line)>;

}  // namespace gpushare::daemon
