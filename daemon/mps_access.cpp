#include "mps_access.h"

#include <signal.h>

#include <cerrno>
#include <fstream>
#include <iterator>

namespace gpushare::daemon {

MpsAccess decide_mps_access(const MpsService& service, uid_t peer_uid,
                            std::optional<uid_t> serving_uid) {
  if (!service.available) return {false, service.unavailable, false};
  if (service.owner_uid != 0 && peer_uid != service.owner_uid)
    return {false,
            "the MPS control daemon in " + service.pipe_directory + " runs as uid " +
                std::to_string(service.owner_uid) + " and serves only that user",
            true};
  if (serving_uid && *serving_uid != peer_uid)
    return {false,
            "the MPS server serves uid " + std::to_string(*serving_uid) +
                " while its clients run (one user per MPS server); a client of uid " +
                std::to_string(peer_uid) + " would wait in cuInit until they exit",
            true};
  return {true, "", false};
}

MpsClientSettings mps_client_settings(protocol::JobClass granted,
                                      std::optional<int> thread_percentage) {
  if (granted == protocol::JobClass::production) return {0, 0};
  return {1, thread_percentage ? static_cast<uint32_t>(*thread_percentage) : 0};
}

std::optional<uid_t> MpsClients::serving_uid(const Alive& alive) {
  std::optional<uid_t> uid;
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (!alive(it->first)) {
      it = clients_.erase(it);
      continue;
    }
    uid = it->second;
    ++it;
  }
  return uid;
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
  // A zombie has exited: where nobody reaps orphans (a container's init), it would look alive.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

}  // namespace gpushare::daemon
