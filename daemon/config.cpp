#include "config.h"

#include <grp.h>
#include <pwd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gpushare/policies/policy.h"
#include "gpushare/protocol/wire.h"
#include "scheduler.h"

namespace gpushare::daemon {
namespace {

using nlohmann::json;


// Collects errors while walking the document; `path` is a JSON-pointer-like dotted path.
struct Checker {
  std::vector<std::string> errors;

  void fail(const std::string& path, const std::string& what) {
    errors.push_back(path + ": " + what);
  }

  void fail_expected(const std::string& path, const std::string& expected, const json& got) {
    std::string shown = got.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    fail(path, "expected " + expected + ", got " + shown);
  }

  // Unknown keys are errors: a typo must not silently fall back to a default.
  void known_keys(const std::string& path, const json& object, std::set<std::string> keys) {
    for (const auto& [key, value] : object.items()) {
      if (keys.count(key)) continue;
      std::string list;
      for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
      fail(path.empty() ? key : path + "." + key, "unknown field (expected one of: " + list + ")");
    }
  }

  std::optional<std::string> string(const std::string& path, const json& v) {
    if (!v.is_string()) return fail_expected(path, "a string", v), std::nullopt;
    return v.get<std::string>();
  }

  std::optional<int64_t> integer(const std::string& path, const json& v, int64_t lo, int64_t hi) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      fail_expected(path, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                    v);
      return std::nullopt;
    }
    return v.get<int64_t>();
  }

  std::optional<uid_t> user_name(const std::string& path, const json& v) {
    auto name = string(path, v);
    if (!name) return std::nullopt;
    passwd pw, *found = nullptr;
    char buffer[4096];
    if (getpwnam_r(name->c_str(), &pw, buffer, sizeof buffer, &found) != 0 || !found)
      return fail(path, "no user named \"" + *name + "\""), std::nullopt;
    return found->pw_uid;
  }

  std::optional<gid_t> group_name(const std::string& path, const json& v) {
    auto name = string(path, v);
    if (!name) return std::nullopt;
    struct group gr, *found = nullptr;
    char buffer[16384];
    if (getgrnam_r(name->c_str(), &gr, buffer, sizeof buffer, &found) != 0 || !found)
      return fail(path, "no group named \"" + *name + "\""), std::nullopt;
    return found->gr_gid;
  }

  // A group given by name ("gpushare") or by number (1001).
  std::optional<gid_t> group_or_gid(const std::string& path, const json& v) {
    if (v.is_number_integer()) {
      auto gid = integer(path, v, 0, 0xfffffffe);
      return gid ? std::optional<gid_t>(static_cast<gid_t>(*gid)) : std::nullopt;
    }
    if (!v.is_string()) return fail_expected(path, "a group name or a gid", v), std::nullopt;
    return group_name(path, v);
  }

  void policy(const std::string& path, const json& v, std::string* out) {
    auto name = string(path, v);
    if (!name) return;
    if (!policy_known(*name))
      return fail(path, "unknown policy \"" + *name +
                            "\" (expected one of: " + known_policies_text() + ")");
    *out = *name;
  }
};

void parse_socket(Checker& c, const json& s, Config& config) {
  if (!s.is_object()) return c.fail_expected("socket", "an object", s);
  c.known_keys("socket", s, {"path", "mode", "group"});
  if (s.contains("path")) {
    if (auto path = c.string("socket.path", s["path"])) {
      // sun_path holds 108 bytes including the NUL.
      if (path->empty() || (*path)[0] != '/' || path->size() > 107)
        c.fail_expected("socket.path", "an absolute path of at most 107 bytes", s["path"]);
      else
        config.socket_path = *path;
    }
  }
  if (s.contains("mode")) {
    const json& m = s["mode"];
    bool ok = m.is_string() && m.get<std::string>().size() >= 3 && m.get<std::string>().size() <= 4;
    mode_t mode = 0;
    if (ok)
      for (char ch : m.get<std::string>()) {
        if (ch < '0' || ch > '7') ok = false;
        mode = mode * 8 + static_cast<mode_t>(ch - '0');
      }
    if (!ok || mode > 0777)
      c.fail_expected("socket.mode", "an octal permission string such as \"0660\"", m);
    else
      config.socket_mode = mode;
  }
  if (s.contains("group")) config.socket_group = c.group_or_gid("socket.group", s["group"]);
}

// The pod keys of a production rule (docs/daemon.md, "Containers"). Values are compared with
// what the cgroup path gives, so they must be in the same form: a mistyped id would otherwise
// match nothing, silently.
void parse_pod_keys(Checker& c, const std::string& path, const json& r, ProductionRule& rule) {
  if (r.contains("pod_uid")) {
    auto uid = c.string(path + ".pod_uid", r["pod_uid"]);
    if (uid && !valid_pod_uid(*uid))
      c.fail_expected(path + ".pod_uid",
                      "a pod UID in lowercase (8-4-4-4-12 hex, or 32 hex for a static pod)",
                      r["pod_uid"]);
    else if (uid)
      rule.pod_uid = *uid;
  }
  if (r.contains("container_id")) {
    auto id = c.string(path + ".container_id", r["container_id"]);
    if (id && !valid_container_id(*id))
      c.fail_expected(path + ".container_id",
                      "a container id of 64 lowercase hex digits (no runtime prefix such as "
                      "containerd://)",
                      r["container_id"]);
    else if (id)
      rule.container_id = *id;
  }
  if (r.contains("qos")) {
    auto name = c.string(path + ".qos", r["qos"]);
    auto qos = name ? parse_qos(*name) : std::nullopt;
    if (name && !qos)
      c.fail_expected(path + ".qos", "one of guaranteed, burstable, besteffort", r["qos"]);
    else if (qos)
      rule.qos = *qos;
  }
}

void parse_production(Checker& c, const json& rules, Config& config) {
  if (!rules.is_array()) return c.fail_expected("production", "an array of rules", rules);
  for (size_t i = 0; i < rules.size(); ++i) {
    std::string path = "production[" + std::to_string(i) + "]";
    const json& r = rules[i];
    if (!r.is_object()) {
      c.fail_expected(path, "an object such as {\"user\": \"alice\", \"job\": \"serve-*\"}", r);
      continue;
    }
    c.known_keys(path, r,
                 {"uid", "user", "gid", "group", "job", "pod_uid", "container_id", "qos",
                  "resource", "namespace", "pod"});
    ProductionRule rule;
    rule.text = r.dump();
    if (r.contains("uid") && r.contains("user")) c.fail(path, "give \"uid\" or \"user\", not both");
    if (r.contains("gid") && r.contains("group"))
      c.fail(path, "give \"gid\" or \"group\", not both");
    if (r.contains("uid")) {
      if (auto uid = c.integer(path + ".uid", r["uid"], 0, 0xfffffffe))
        rule.uid = static_cast<uid_t>(*uid);
    }
    if (r.contains("user")) rule.uid = c.user_name(path + ".user", r["user"]);
    if (r.contains("gid")) {
      if (auto gid = c.integer(path + ".gid", r["gid"], 0, 0xfffffffe))
        rule.gid = static_cast<gid_t>(*gid);
    }
    if (r.contains("group")) rule.gid = c.group_name(path + ".group", r["group"]);
    if (r.contains("job")) {
      auto job = c.string(path + ".job", r["job"]);
      if (job && (job->empty() || job->size() >= protocol::kJobNameSize))
        c.fail_expected(path + ".job", "a job-name pattern of 1 to 63 characters", r["job"]);
      else if (job)
        rule.job = *job;
    }
    parse_pod_keys(c, path, r, rule);
    parse_allocation_rule_keys(path, r, &rule, &c.errors);
    if (r.empty())
      c.fail(path,
             "a rule must name at least one of uid, user, gid, group, job, pod_uid, container_id, "
             "qos, resource, namespace, pod");
    config.production_rules.push_back(std::move(rule));
  }
}

// "parameters": {"tgs": {"target": 0.9}}: each checked by the policy registry itself, which
// names the parameter and its range when one is wrong.
void parse_policy_parameters(Checker& c, const json& all, Config& config) {
  if (!all.is_object())
    return c.fail_expected("policy.parameters", "an object such as {\"tgs\": {\"target\": 0.9}}",
                           all);
  for (const auto& [name, values] : all.items()) {
    std::string path = "policy.parameters." + name;
    if (!policy_known(name)) {
      c.fail(path, "unknown policy \"" + name + "\" (expected one of: " + known_policies_text() + ")");
      continue;
    }
    if (!values.is_object()) {
      c.fail_expected(path, "an object of numbers", values);
      continue;
    }
    policies::Parameters parameters;
    bool numbers = true;
    for (const auto& [key, value] : values.items()) {
      if (!value.is_number()) {
        c.fail_expected(path + "." + key, "a number", value);
        numbers = false;
        continue;
      }
      parameters[key] = value.get<double>();
    }
    if (!numbers) continue;
    policies::MakePolicyResult made = policies::make_policy(name, parameters, kShimCapabilities);
    if (!made.policy) {
      c.fail(path, made.error);
      continue;
    }
    config.policy_parameters[name] = parameters;
  }
}

void parse_policy(Checker& c, const json& p, Config& config) {
  if (!p.is_object()) return c.fail_expected("policy", "an object", p);
  c.known_keys("policy", p, {"default", "devices", "parameters"});
  if (p.contains("default")) c.policy("policy.default", p["default"], &config.default_policy);
  if (p.contains("parameters")) parse_policy_parameters(c, p["parameters"], config);
  if (!p.contains("devices")) return;
  const json& devices = p["devices"];
  if (!devices.is_object())
    return c.fail_expected("policy.devices", "an object such as {\"0\": \"none\"}", devices);
  for (const auto& [key, value] : devices.items()) {
    std::string path = "policy.devices." + key;
    char* end = nullptr;
    long index = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || index < 0 || index > protocol::kMaxDeviceIndex) {
      c.fail(path,
             "a device key must be a device index 0.." + std::to_string(protocol::kMaxDeviceIndex));
      continue;
    }
    std::string name;
    c.policy(path, value, &name);
    if (!name.empty()) config.device_policies[static_cast<int>(index)] = name;
  }
}

}  // namespace

std::string ConfigResult::error_text() const {
  std::string text;
  for (const auto& e : errors) text += (text.empty() ? "" : "; ") + e;
  return text;
}

ConfigResult parse_config(std::string_view text) {
  ConfigResult result;
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e400") is out_of_range (406),
    // which used to escape and kill the daemon at start and on a SIGHUP reload (found by
    // tests/fuzz/config_fuzz.cpp).
    result.errors.push_back(std::string("(document): not valid JSON: ") + e.what());
    return result;
  }
  Checker c;
  Config config;
  if (!doc.is_object()) {
    c.fail_expected("(document)", "an object", doc);
  } else {
    c.known_keys(
        "", doc,
        {"socket", "admin_group", "production", "policy", "tick_ms", "max_clients", "log_level",
         "memory", "mps", "mps_thread_percentage", "mps_pipe_directory", "metrics", "kubernetes"});
    if (doc.contains("kubernetes"))
      parse_kubernetes_config(doc["kubernetes"], &config.kubernetes, &c.errors);
    if (doc.contains("memory")) parse_memory_config(doc["memory"], &config.memory, &c.errors);
    if (doc.contains("metrics")) parse_metrics_config(doc["metrics"], &config.metrics, &c.errors);
    parse_mps_config(doc, &config.mps, &c.errors);
    if (doc.contains("socket")) parse_socket(c, doc["socket"], config);
    if (doc.contains("admin_group"))
      config.admin_group = c.group_or_gid("admin_group", doc["admin_group"]);
    if (doc.contains("production")) parse_production(c, doc["production"], config);
    if (doc.contains("policy")) parse_policy(c, doc["policy"], config);
    if (doc.contains("tick_ms")) {
      // 10 ms keeps the tick cheap; above 1 s rate control would react too slowly.
      if (auto ms = c.integer("tick_ms", doc["tick_ms"], 10, 1000))
        config.tick = std::chrono::milliseconds(*ms);
    }
    if (doc.contains("max_clients")) {
      if (auto n = c.integer("max_clients", doc["max_clients"], 1, 65536))
        config.max_clients = static_cast<size_t>(*n);
    }
    if (doc.contains("log_level")) {
      auto level = c.string("log_level", doc["log_level"]);
      static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
      if (level && !kLevels.count(*level))
        c.fail_expected("log_level", "one of trace, debug, info, warn, error", doc["log_level"]);
      else if (level)
        config.log_level = *level;
    }
  }
  result.errors = std::move(c.errors);
  if (result.errors.empty()) result.config = std::move(config);
  return result;
}

ConfigResult load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ConfigResult result;
    result.errors.push_back(path + ": cannot be read: " + std::strerror(errno));
    return result;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str());
}

// Every policy of policies/ is available: the registry there is the one list.
bool policy_known(std::string_view name) {
  for (std::string_view p : policies::policy_names())
    if (p == name) return true;
  return false;
}

std::string known_policies_text() {
  std::string text;
  for (std::string_view p : policies::policy_names())
    text += (text.empty() ? "" : ", ") + std::string(p);
  return text;
}


}  // namespace gpushare::daemon
