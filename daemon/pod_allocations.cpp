// The token is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) relative to the job's
// root: following a symlink through /proc/<pid>/root resolves absolute targets in the daemon's
// own root, so a container could otherwise point its token path at any host file, another
// container's token included. Bind mounts are crossed (the token is one).
#include "pod_allocations.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "config.h"
#include "gpushare/protocol/pod_allocation.h"

namespace gpushare::daemon {
namespace {

using nlohmann::json;

constexpr size_t kMaxMapBytes = 4 << 20;  // ~20000 allocations; a node has a few hundred pods

bool lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// RFC 1123 label: what Kubernetes allows for a namespace and a container name.
bool dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

// RFC 1123 subdomain: a pod's name.
bool dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!dns_label(s.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// An extended resource name: "<domain>/<name>", as the plugin advertises it.
bool resource_name(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos || s.size() > 253) return false;
  std::string_view name = s.substr(slash + 1);
  return dns_subdomain(s.substr(0, slash)) && !name.empty() && name.size() <= 63 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

std::string shown(const json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

// A file the plugin (root) wrote: regular, owned by root or by the daemon's own user (tests run
// both as one user), writable by no one else.
std::string trusted_file_problem(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not root";
  if (st.st_mode & 022) return "writable by group or others";
  return "";
}

std::string read_map(const std::string& path, std::string* problem) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return *problem = path + ": " + std::strerror(errno), "";
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) != 0) {
    *problem = path + ": " + std::strerror(errno);
  } else if (std::string why = trusted_file_problem(st); !why.empty()) {
    *problem = path + ": " + why;
  } else if (static_cast<size_t>(st.st_size) > kMaxMapBytes) {
    *problem = path + ": larger than 4 MiB";
  } else {
    text.resize(static_cast<size_t>(st.st_size) + 1);
    size_t used = 0;
    while (used < text.size()) {
      ssize_t n = ::read(fd, text.data() + used, text.size() - used);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      used += static_cast<size_t>(n);
    }
    text.resize(used);
    if (used > kMaxMapBytes) *problem = path + ": larger than 4 MiB";
  }
  ::close(fd);
  return text;
}

std::optional<std::string> optional_field(const json& a, const char* key,
                                          bool (*valid)(std::string_view), std::string* problem,
                                          const std::string& where) {
  if (!a.contains(key)) return std::nullopt;
  const json& v = a[key];
  if (!v.is_string() || !valid(v.get<std::string>())) {
    *problem = where + "." + key + ": not a valid name: " + shown(v);
    return std::nullopt;
  }
  return v.get<std::string>();
}

}  // namespace

void parse_kubernetes_config(const json& section, KubernetesConfig* out,
                             std::vector<std::string>* errors) {
  if (!section.is_object()) {
    errors->push_back(
        "kubernetes: expected an object such as {\"allocations\": \"/var/lib/…\"}, "
        "got " +
        shown(section));
    return;
  }
  for (const auto& [key, value] : section.items())
    if (key != "allocations")
      errors->push_back("kubernetes." + key + ": unknown field (expected one of: allocations)");
  if (!section.contains("allocations")) return;
  const json& path = section["allocations"];
  if (!path.is_string() || path.get<std::string>().empty() || path.get<std::string>()[0] != '/')
    errors->push_back(
        "kubernetes.allocations: expected the absolute path of the device "
        "plugin's allocations.json, got " +
        shown(path));
  else
    out->allocations = path.get<std::string>();
}

void parse_allocation_rule_keys(const std::string& path, const json& r, ProductionRule* rule,
                                std::vector<std::string>* errors) {
  auto text = [&](const char* key) -> std::optional<std::string> {
    if (!r.contains(key)) return std::nullopt;
    if (!r[key].is_string()) {
      errors->push_back(path + "." + key + ": expected a string, got " + shown(r[key]));
      return std::nullopt;
    }
    return r[key].get<std::string>();
  };
  if (auto resource = text("resource")) {
    if (!resource_name(*resource))
      errors->push_back(path +
                        ".resource: expected an extended resource such as "
                        "\"gpushare.io/production\", got \"" +
                        *resource + "\"");
    else
      rule->resource = *resource;
  }
  if (auto ns = text("namespace")) {
    if (!dns_label(*ns))
      errors->push_back(path +
                        ".namespace: expected a namespace name (lowercase letters, digits "
                        "and '-', at most 63), got \"" +
                        *ns + "\"");
    else
      rule->pod_namespace = *ns;
  }
  if (auto pod = text("pod")) {
    if (pod->empty() || pod->size() > 253)
      errors->push_back(path + ".pod: expected a pod-name pattern of 1 to 253 characters");
    else
      rule->pod_name = *pod;
  }
}

PodAllocations parse_pod_allocations(std::string_view text) {
  PodAllocations result;
  json doc = json::parse(text, nullptr, false);
  auto refuse = [&](std::string why) {
    result.allocations.clear();
    result.problem = std::move(why);
    return result;
  };
  if (doc.is_discarded()) return refuse("not valid JSON");
  if (!doc.is_object()) return refuse("not a JSON object");
  for (const auto& [key, value] : doc.items())
    if (key != "version" && key != "allocations") return refuse("unknown field \"" + key + "\"");
  if (!doc.contains("version") || doc["version"] != protocol::kAllocationMapVersion)
    return refuse("version is not " + std::to_string(protocol::kAllocationMapVersion));
  if (!doc.contains("allocations") || !doc["allocations"].is_array())
    return refuse("allocations is not an array");
  static const std::set<std::string> kKeys = {"token",     "resource", "devices",
                                              "namespace", "pod",      "container"};
  std::set<std::string> tokens;
  for (size_t i = 0; i < doc["allocations"].size(); ++i) {
    const json& a = doc["allocations"][i];
    std::string where = "allocations[" + std::to_string(i) + "]";
    if (!a.is_object()) return refuse(where + ": not an object");
    for (const auto& [key, value] : a.items())
      if (!kKeys.count(key)) return refuse(where + ": unknown field \"" + key + "\"");
    PodAllocation p;
    if (!a.contains("token") || !a["token"].is_string() ||
        a["token"].get<std::string>().size() != 32 || !lower_hex(a["token"].get<std::string>()))
      return refuse(where + ".token: not 32 lowercase hex digits");
    p.token = a["token"].get<std::string>();
    if (!tokens.insert(p.token).second) return refuse(where + ".token: listed twice");
    if (!a.contains("resource") || !a["resource"].is_string() ||
        !resource_name(a["resource"].get<std::string>()))
      return refuse(where + ".resource: not an extended resource name");
    p.resource = a["resource"].get<std::string>();
    if (!a.contains("devices") || !a["devices"].is_array() || a["devices"].empty())
      return refuse(where + ".devices: not a non-empty array");
    for (const auto& d : a["devices"]) {
      if (!d.is_string() || d.get<std::string>().empty() || d.get<std::string>().size() > 63)
        return refuse(where + ".devices: an id that is not a string of 1 to 63 characters");
      p.devices.push_back(d.get<std::string>());
    }
    std::string problem;
    p.pod_namespace = optional_field(a, "namespace", dns_label, &problem, where);
    p.pod_name = optional_field(a, "pod", dns_subdomain, &problem, where);
    p.container = optional_field(a, "container", dns_label, &problem, where);
    if (!problem.empty()) return refuse(problem);
    if (p.pod_namespace.has_value() != p.pod_name.has_value() ||
        p.pod_name.has_value() != p.container.has_value())
      return refuse(where + ": namespace, pod and container go together");
    result.allocations.push_back(std::move(p));
  }
  return result;
}

AllocationLookup allocation_of_process(const std::string& map_path, const std::string& proc_root,
                                       long pid) {
  std::string root_path = proc_root + "/" + std::to_string(pid) + "/root";
  int root = ::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0 && errno == ENOENT) return {};  // the process is gone
  if (root < 0) return {std::nullopt, root_path + ": " + std::strerror(errno)};
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  std::string relative = std::string(protocol::kAllocationTokenPath).substr(1);
  int token = static_cast<int>(::syscall(SYS_openat2, root, relative.c_str(), &how, sizeof how));
  int error = errno;
  ::close(root);
  if (token < 0 && error == ENOENT) return {};  // no allocation: a pod the plugin never served
  if (token < 0)
    return {std::nullopt, std::string(protocol::kAllocationTokenPath) + " in the job's root: " +
                              (error == ELOOP ? "a symlink on the way" : std::strerror(error))};
  struct stat held {};
  bool stat_ok = ::fstat(token, &held) == 0;
  ::close(token);
  if (!stat_ok || !S_ISREG(held.st_mode))
    return {std::nullopt,
            std::string(protocol::kAllocationTokenPath) + " in the job's root is not a file"};

  std::string problem;
  std::string text = read_map(map_path, &problem);
  if (!problem.empty()) return {std::nullopt, problem};
  PodAllocations map = parse_pod_allocations(text);
  if (!map.problem.empty()) return {std::nullopt, map_path + ": " + map.problem};
  std::string dir = map_path.substr(0, map_path.rfind('/') + 1) + protocol::kAllocationTokenDir;
  for (const auto& a : map.allocations) {
    struct stat st {};
    std::string path = dir + "/" + a.token;
    if (::lstat(path.c_str(), &st) != 0) continue;  // ended: the plugin removed it
    if (st.st_dev != held.st_dev || st.st_ino != held.st_ino) continue;
    if (std::string why = trusted_file_problem(st); !why.empty())
      return {std::nullopt, path + ": " + why};
    return {a, ""};
  }
  return {std::nullopt, std::string(protocol::kAllocationTokenPath) +
                            " in the job's root is no token of " + map_path};
}

ProcessPod pod_of_process(const std::string& proc_root, long pid,
                          const KubernetesConfig& kubernetes) {
  CgroupIdentity cgroup = read_pod_identity(proc_root, pid);
  ProcessPod result{cgroup.pod, cgroup.problem, ""};
  if (!result.pod || !kubernetes.allocations) return result;
  AllocationLookup held = allocation_of_process(*kubernetes.allocations, proc_root, pid);
  result.allocation_problem = held.problem;
  if (held.allocation) {
    result.pod->resource = held.allocation->resource;
    result.pod->pod_namespace = held.allocation->pod_namespace;
    result.pod->pod_name = held.allocation->pod_name;
    result.pod->container_name = held.allocation->container;
  }
  return result;
}

}  // namespace gpushare::daemon
