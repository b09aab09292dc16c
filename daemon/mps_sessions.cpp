#include "mps_sessions.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "authorization.h"
#include "gpushare/protocol/ctl.h"
#include "logging.h"
#include "pod_allocations.h"

namespace gpushare::daemon {

std::string mps_query_problem(const protocol::MpsQuery& q) {
  if (q.requested_class > 1)
    return "requested class " + std::to_string(q.requested_class) + " is not 0 or 1";
  if (q.reserved != 0) return "reserved field is not 0";
  if (!protocol::terminated(q.job_name)) return "job name is not NUL-terminated";
  if (q.job_name[0] == '\0') return "job name is empty";
  return "";
}

void MpsSessions::on_query(Connection& c, const protocol::MpsQuery& q) {
  if (std::string problem = mps_query_problem(q); !problem.empty())
    return hooks_.drop(c.fd, "bad mps_query: " + problem);
  std::string name(q.job_name, strnlen(q.job_name, sizeof q.job_name));
  for (char& ch : name)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  auto granted = static_cast<protocol::JobClass>(q.requested_class);
  // The class registration will grant, so pod and allocation rules count here too.
  const Config& config = parts_.config;
  Peer peer = c.peer;
  peer.pod = pod_of_process(parts_.proc_root, c.peer.pid, config.kubernetes).pod;
  if (granted == protocol::JobClass::production && !production_rule_for(config, peer, name))
    granted = protocol::JobClass::opportunistic;

  protocol::MpsReply answer{};
  answer.granted_class = static_cast<uint32_t>(granted);
  const MpsService service = hooks_.service();
  const MpsAccess access =
      decide_mps_access(service, c.peer.uid, parts_.clients.serving_uid(hooks_.alive));
  if (access.granted) {
    const MpsClientSettings settings = mps_client_settings(granted, config.mps.thread_percentage);
    answer.status = static_cast<uint32_t>(protocol::MpsStatus::use_mps);
    answer.client_priority = settings.priority;
    answer.active_thread_percentage = settings.thread_percentage;
    protocol::copy_text(answer.pipe_directory, service.pipe_directory.c_str());
    protocol::copy_text(answer.message, "MPS client");
    parts_.clients.add(c.peer.pid, c.peer.uid);
    spdlog::info("mps client pid={} uid={} job={} class={} priority={} threads={}", c.peer.pid,
                 c.peer.uid, name, class_name(granted), settings.priority,
                 settings.thread_percentage ? std::to_string(settings.thread_percentage) + "%"
                                            : std::string("all"));
  } else {
    answer.status = static_cast<uint32_t>(protocol::MpsStatus::no_mps);
    // With MPS off there is nothing to explain to every job.
    if (hooks_.mode() != MpsMode::off) protocol::copy_text(answer.message, access.why.c_str());
    // Said once per user: every job of that user would repeat it.
    if (access.other_user && refused_uids_.insert(c.peer.uid).second)
      spdlog::warn("mps: no MPS for uid {} (pid={} job={}): {}; its jobs run time-sliced",
                   c.peer.uid, c.peer.pid, log_text(name), access.why);
    else
      spdlog::debug("mps: no MPS for pid={} job={}: {}", c.peer.pid, log_text(name), access.why);
  }
  hooks_.reply(c, protocol::MessageType::mps_reply, &answer, sizeof answer);
}

bool MpsSessions::answer_ctl(Connection& c, const uint8_t* payload, size_t length) {
  nlohmann::json request =
      nlohmann::json::parse(payload, payload + length, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object() ||
      request.value(protocol::ctl::kCommand, nlohmann::json()) != protocol::ctl::command::kMps)
    return false;
  nlohmann::json answer = {{"ok", true}, {"mps", hooks_.status()}};
  if (parts_.config.mps.thread_percentage)
    answer["mps"]["thread_percentage"] = *parts_.config.mps.thread_percentage;
  std::string text = answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  hooks_.reply(c, protocol::MessageType::ctl_reply, text.data(), text.size());
  return true;
}

}  // namespace gpushare::daemon
