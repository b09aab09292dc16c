// When to register again. The kubelet removes every plugin socket and forgets every plugin when
// it restarts, then creates a new kubelet.sock; a plugin must serve again and re-register. The
// plugin polls: a kubelet.sock with a new inode, or its own socket gone, means register again.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpushare::deviceplugin {

struct SocketIdentity {
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const SocketIdentity&) const = default;
};

SocketIdentity socket_identity(const std::string& path);

enum class WatchAction {
  none,                // registered with this kubelet, serving
  wait,                // no kubelet socket: nothing to register with
  serve_and_register,  // (re)create the plugin's sockets and register
};

// `registered_with`: the kubelet socket the last successful registration went to (exists false
// when none); `own_sockets_present`: every plugin socket is still in the folder.
WatchAction watch_action(const SocketIdentity& kubelet_now, const SocketIdentity& registered_with,
                         bool own_sockets_present);

}  // namespace gpushare::deviceplugin
