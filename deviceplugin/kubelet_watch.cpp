#include "kubelet_watch.h"

#include <sys/stat.h>

namespace gpushare::deviceplugin {

SocketIdentity socket_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return {};
  return {true, st.st_dev, st.st_ino};
}

WatchAction watch_action(const SocketIdentity& kubelet_now, const SocketIdentity& registered_with,
                         bool own_sockets_present) {
  if (!kubelet_now.exists) return WatchAction::wait;
  if (!(kubelet_now == registered_with) || !own_sockets_present)
    return WatchAction::serve_and_register;
  return WatchAction::none;
}

}  // namespace gpushare::deviceplugin
