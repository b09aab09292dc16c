// The cgroup path is split into segments and checked against the kubelet's two naming
// conventions (container_identity.h). Everything that is not exactly that shape is refused with a
// reason: the daemon grants nothing on a guess.
#include "container_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace gpushare::daemon {
namespace {

// Far above any real path (a systemd pod path is ~200 bytes) and any real /proc/<pid>/cgroup
// (one line per v1 hierarchy, about a dozen).
constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxFileBytes = 64 * 1024;
constexpr size_t kMaxLines = 64;

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

CgroupIdentity refused(std::string why) {
  return {std::nullopt, std::move(why)};
}

// "/a/b/c" -> {"a", "b", "c"}; false for a relative path, an empty segment ("//", a trailing
// '/'), "." or ".." (a cgroup outside the daemon's cgroup namespace shows as "/../.."), or a
// byte that is not printable ASCII.
bool split_path(std::string_view path, std::vector<std::string_view>* segments, std::string* why) {
  if (path.size() > kMaxPathBytes) return *why = "path longer than 4096 bytes", false;
  for (char c : path)
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
      return *why = "path has a byte that is not printable ASCII", false;
  if (path.empty() || path[0] != '/') return *why = "path is not absolute", false;
  if (path == "/") return true;
  std::string_view rest = path.substr(1);
  while (true) {
    size_t slash = rest.find('/');
    std::string_view segment = rest.substr(0, slash);
    if (segment.empty()) return *why = "path has an empty segment", false;
    if (segment == "." || segment == "..")
      return *why = "path has '" + std::string(segment) +
                    "' (the daemon must see the host's cgroup namespace)",
             false;
    segments->push_back(segment);
    if (slash == std::string_view::npos) return true;
    rest = rest.substr(slash + 1);
  }
}

// A pod uid as the API server writes it (8-4-4-4-12 lowercase hex), or a static pod's (32 hex,
// the kubelet's hash of the manifest).
bool pod_uid_shape(std::string_view uid) {
  if (uid.size() == 32) return lower_hex(uid);
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < uid.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (uid[i] == '-')) return false;
    if (!dash && !lower_hex(uid.substr(i, 1))) return false;
  }
  return true;
}

std::optional<PodQos> qos_level(std::string_view part) {
  if (part == "burstable") return PodQos::burstable;
  if (part == "besteffort") return PodQos::besteffort;
  return std::nullopt;
}

// "cri-containerd-<id>", "crio-<id>", "docker-<id>" (and, with cgroupfs, a bare "<id>").
bool container_segment(std::string_view segment, bool bare_allowed, PodIdentity* pod) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kRuntimes = {{
      {"cri-containerd-", "containerd"},
      {"crio-", "crio"},
      {"docker-", "docker"},
  }};
  std::string_view id = segment;
  pod->runtime.clear();
  for (const auto& [prefix, runtime] : kRuntimes)
    if (starts_with(segment, prefix)) {
      id = segment.substr(prefix.size());
      pod->runtime = runtime;
    }
  if (pod->runtime.empty() && !bare_allowed) return false;
  if (!valid_container_id(id)) return false;
  pod->container_id = id;
  return true;
}

// systemd driver: every slice's name extends its parent's by "-<part>" (systemd.slice(5)), so
// the chain of parts is [prefix..., "kubepods", (qos), "pod<uid with _>"], then one scope.
CgroupIdentity systemd_path(const std::vector<std::string_view>& segments) {
  std::vector<std::string_view> parts;
  std::string_view parent;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    std::string_view s = segments[i];
    if (!ends_with(s, ".slice")) return refused("'" + std::string(s) + "' is not a slice");
    std::string_view name = s.substr(0, s.size() - 6);
    std::string_view part = name;
    if (!parent.empty()) {
      if (name.size() <= parent.size() + 1 || !starts_with(name, parent) ||
          name[parent.size()] != '-')
        return refused("slice '" + std::string(s) + "' does not extend its parent's name");
      part = name.substr(parent.size() + 1);
    }
    if (part.empty() || part.find('-') != std::string_view::npos)
      return refused("slice '" + std::string(s) + "' is not named after its parent");
    parts.push_back(part);
    parent = name;
  }
  auto kubepods = std::find(parts.begin(), parts.end(), "kubepods");
  if (kubepods == parts.end()) return refused("no kubepods slice");
  std::vector<std::string_view> below(kubepods + 1, parts.end());
  PodIdentity pod;
  pod.qos = PodQos::guaranteed;
  if (below.size() == 2) {
    auto qos = qos_level(below[0]);
    if (!qos) return refused("unknown QoS level '" + std::string(below[0]) + "'");
    pod.qos = *qos;
    below.erase(below.begin());
  }
  if (below.size() != 1) return refused("not kubepods[-qos]-pod<uid>.slice/<container>.scope");
  if (!starts_with(below[0], "pod")) return refused("no pod slice");
  std::string uid(below[0].substr(3));
  if (uid.find('-') != std::string::npos) return refused("pod uid with '-' in a slice name");
  std::replace(uid.begin(), uid.end(), '_', '-');
  if (!pod_uid_shape(uid)) return refused("pod uid '" + uid + "' is not a UID");
  pod.pod_uid = uid;
  std::string_view scope = segments.back();
  if (!ends_with(scope, ".scope") ||
      !container_segment(scope.substr(0, scope.size() - 6), false, &pod))
    return refused("'" + std::string(scope) +
                   "' is not cri-containerd-, crio- or docker-<64 hex>.scope");
  return {pod, ""};
}

// cgroupfs driver: [prefix...]/kubepods/(qos)/pod<uid>/<container>.
CgroupIdentity cgroupfs_path(const std::vector<std::string_view>& segments) {
  auto kubepods = std::find(segments.begin(), segments.end(), "kubepods");
  if (kubepods == segments.end()) return refused("no kubepods cgroup");
  std::vector<std::string_view> below(kubepods + 1, segments.end());
  PodIdentity pod;
  pod.qos = PodQos::guaranteed;
  if (below.size() == 3) {
    auto qos = qos_level(below[0]);
    if (!qos) return refused("unknown QoS level '" + std::string(below[0]) + "'");
    pod.qos = *qos;
    below.erase(below.begin());
  }
  if (below.size() != 2) return refused("not kubepods/[qos/]pod<uid>/<container>");
  if (!starts_with(below[0], "pod") || !pod_uid_shape(below[0].substr(3)))
    return refused("'" + std::string(below[0]) + "' is not pod<uid>");
  pod.pod_uid = below[0].substr(3);
  if (!container_segment(below[1], true, &pod))
    return refused("'" + std::string(below[1]) + "' is not a 64-hex container id");
  return {pod, ""};
}

}  // namespace

const char* qos_name(PodQos qos) {
  switch (qos) {
    case PodQos::guaranteed:
      return "guaranteed";
    case PodQos::burstable:
      return "burstable";
    case PodQos::besteffort:
      return "besteffort";
  }
  return "?";
}

std::optional<PodQos> parse_qos(std::string_view name) {
  if (name == "guaranteed") return PodQos::guaranteed;
  return qos_level(name);
}

bool valid_pod_uid(std::string_view uid) {
  return pod_uid_shape(uid);
}

bool valid_container_id(std::string_view id) {
  return id.size() == 64 && lower_hex(id);
}

CgroupIdentity pod_from_cgroup_path(std::string_view path) {
  // A process outside Kubernetes: not a problem, just no pod.
  if (path.find("kubepods") == std::string_view::npos) return {};
  std::vector<std::string_view> segments;
  std::string why;
  if (!split_path(path, &segments, &why)) return refused(why);
  // Exactly one segment may mention kubepods: a container that can make cgroups below its own
  // (privileged) must not be able to nest a second, fake pod path there.
  size_t mentions = std::count_if(segments.begin(), segments.end(), [](std::string_view s) {
    return s.find("kubepods") != std::string_view::npos;
  });
  if (segments.empty()) return refused("empty path");
  bool systemd = ends_with(segments.back(), ".scope");
  // In systemd naming every slice below kubepods repeats "kubepods" (kubepods-burstable.slice).
  if (!systemd && mentions != 1) return refused("more than one segment names kubepods");
  if (systemd) {
    size_t first = std::find_if(segments.begin(), segments.end(),
                                [](std::string_view s) {
                                  return s.find("kubepods") != std::string_view::npos;
                                }) -
                   segments.begin();
    // kubepods.slice, (qos slice), pod slice: the only ones after the first mention.
    if (segments.size() - first - 1 > 3 ||
        segments.back().find("kubepods") != std::string_view::npos)
      return refused("kubepods appears where the kubelet never puts it");
    return systemd_path(segments);
  }
  return cgroupfs_path(segments);
}

CgroupIdentity pod_from_proc_cgroup(std::string_view text) {
  if (text.size() > kMaxFileBytes) return refused("cgroup file larger than 64 KiB");
  std::optional<PodIdentity> found;
  size_t lines = 0;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    if (++lines > kMaxLines) return refused("more than 64 lines");
    // hierarchy-ID:controller-list:cgroup-path (cgroups(7)); the path may itself hold ':'.
    size_t first = line.find(':');
    size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) return refused("a line is not id:controllers:path");
    std::string_view id = line.substr(0, first);
    if (id.empty() ||
        !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return refused("a line's hierarchy id is not a number");
    CgroupIdentity here = pod_from_cgroup_path(line.substr(second + 1));
    if (!here.problem.empty()) return here;
    if (!here.pod) continue;
    if (found && !(*found == *here.pod))
      return refused("the hierarchies place the process in different pods or containers");
    found = here.pod;
  }
  return {found, ""};
}

CgroupIdentity read_pod_identity(const std::string& proc_root, long pid) {
  std::string path = proc_root + "/" + std::to_string(pid) + "/cgroup";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return refused(path + ": " + std::strerror(errno));
  std::string text(kMaxFileBytes + 1, '\0');
  size_t used = 0;
  while (used < text.size()) {
    ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      return refused(path + ": " + std::strerror(error));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(used);
  return pod_from_proc_cgroup(text);
}

}  // namespace gpushare::daemon
