// Socket plumbing of the daemon: the listening socket and peer identity. Frames are sent and
// received with protocol/framing.h, as every other party does.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "authorization.h"
#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {

// Creates, binds and listens on a SOCK_SEQPACKET Unix socket at `path`, then applies `mode` and
// `group`. A stale socket file is replaced; a socket with a live daemon behind it is not.
// Returns the fd or -1 with `error` set.
int listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group,
                std::string* error);

// Applies mode and group to an existing socket path (on reload).
bool set_socket_access(const std::string& path, mode_t mode, std::optional<gid_t> group,
                       std::string* error);

// The connecting process as the kernel saw it at connect time (SO_PEERCRED, SO_PEERGROUPS).
bool peer_identity(int fd, Peer* peer);

}  // namespace gpushare::daemon
