#include "authorization.h"

#include <fnmatch.h>

#include <algorithm>
#include <string>

namespace gpushare::daemon {

bool Peer::in_group(gid_t g) const {
  return gid == g || std::find(groups.begin(), groups.end(), g) != groups.end();
}

bool is_admin(const Config& config, const Peer& peer) {
  return peer.uid == 0 || (config.admin_group && peer.in_group(*config.admin_group));
}

const ProductionRule* production_rule_for(const Config& config, const Peer& peer,
                                          std::string_view job_name) {
  std::string name(job_name);
  for (const auto& rule : config.production_rules) {
    if (!rule.names_an_identity()) continue;  // a name or a QoS class alone identifies nobody
    if (rule.uid && *rule.uid != peer.uid) continue;
    if (rule.gid && !peer.in_group(*rule.gid)) continue;
    if ((rule.pod_uid || rule.container_id || rule.qos) && !peer.pod) continue;
    if (rule.pod_uid && *rule.pod_uid != peer.pod->pod_uid) continue;
    if (rule.container_id && *rule.container_id != peer.pod->container_id) continue;
    if (rule.qos && *rule.qos != peer.pod->qos) continue;
    if (rule.names_an_allocation() && !peer.pod) continue;
    if (rule.resource && peer.pod->resource != *rule.resource) continue;
    if (rule.pod_namespace && peer.pod->pod_namespace != *rule.pod_namespace) continue;
    if (rule.pod_name &&
        (!peer.pod->pod_name || fnmatch(rule.pod_name->c_str(), peer.pod->pod_name->c_str(), 0)))
      continue;
    if (rule.job && fnmatch(rule.job->c_str(), name.c_str(), 0) != 0) continue;
    return &rule;
  }
  return nullptr;
}

std::vector<std::string> config_warnings(const Config& config) {
  std::vector<std::string> warnings;
  for (size_t i = 0; i < config.production_rules.size(); ++i) {
    const ProductionRule& rule = config.production_rules[i];
    if (rule.names_an_identity()) continue;
    if (rule.pod_name)
      warnings.push_back("production[" + std::to_string(i) + "] " + rule.text +
                         " names a pod but no namespace: any namespace may have a pod of that "
                         "name, so the rule is ignored; add \"namespace\"");
    else if (rule.job && !rule.qos)
      warnings.push_back("production[" + std::to_string(i) + "] " + rule.text +
                         " names a job but no uid/user or gid/group: any user can choose that "
                         "job name, so the rule is ignored; add \"uid\" or \"group\"");
    else
      warnings.push_back("production[" + std::to_string(i) + "] " + rule.text +
                         " names a QoS class but no uid/user, gid/group, pod_uid or "
                         "container_id: anyone who may create a pod can give it that class, so "
                         "the rule is ignored; add \"pod_uid\", \"container_id\" or \"uid\"");
  }
  return warnings;
}

Decision may_set_priority(const Config& config, const Peer& caller, uid_t owner_uid,
                          protocol::JobClass from, protocol::JobClass to) {
  if (is_admin(config, caller)) return {true, ""};
  if (caller.uid != owner_uid)
    return {false, "uid " + std::to_string(caller.uid) + " may not change a job of uid " +
                       std::to_string(owner_uid) + " (only root or the admin group may)"};
  if (to == protocol::JobClass::production && from != protocol::JobClass::production)
    return {false, "only root or the admin group may raise a job to production"};
  return {true, ""};
}

Decision may_administer(const Config& config, const Peer& caller) {
  if (is_admin(config, caller)) return {true, ""};
  return {false, "uid " + std::to_string(caller.uid) + " is neither root nor in the admin group"};
}

const char* class_name(protocol::JobClass c) {
  return c == protocol::JobClass::production ? "production" : "opportunistic";
}

}  // namespace gpushare::daemon
