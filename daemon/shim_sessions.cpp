// The shim's session: registration (with the control block) and memory declarations.
#include "shim_sessions.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "logging.h"
#include "pod_allocations.h"
#include "shared_control_block.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;

// Job names come from the client: anything outside printable ASCII is shown as '?', so a name can
// never forge a log line or a column.
std::string printable_name(const char (&field)[protocol::kJobNameSize]) {
  std::string name(field, strnlen(field, sizeof field));
  for (char& ch : name)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  return name;
}

std::string devices_text(const std::vector<int>& devices) {
  if (devices.empty()) return "any";
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

// " pod=<uid> container=<id> qos=<class>" for a job in a pod, else "", then " resource=<name>"
// and " pod_name=<namespace>/<name>" when the device plugin allocated it. Every value was checked
// by the cgroup parser (hex and dashes) or the allocation map's (Kubernetes names), so it can be
// logged as is.
std::string pod_text(const std::optional<PodIdentity>& pod) {
  if (!pod) return "";
  std::string text =
      " pod=" + pod->pod_uid + " container=" + pod->container_id + " qos=" + qos_name(pod->qos);
  if (pod->resource) text += " resource=" + *pod->resource;
  if (pod->pod_namespace && pod->pod_name)
    text += " pod_name=" + *pod->pod_namespace + "/" + *pod->pod_name;
  return text;
}

}  // namespace

// Why a registration is malformed, or "" when it is well formed.
std::string registration_problem(const protocol::RegisterRequest& r) {
  if (r.requested_class > 1)
    return "requested class " + std::to_string(r.requested_class) + " is not 0 or 1";
  if (r.device_count > protocol::kMaxDevices)
    return "device_count " + std::to_string(r.device_count) + " is over " +
           std::to_string(protocol::kMaxDevices);
  for (uint32_t i = 0; i < r.device_count; ++i)
    if (r.devices[i] < 0 || r.devices[i] > protocol::kMaxDeviceIndex)
      return "device index " + std::to_string(r.devices[i]) + " is out of range";
  if (!protocol::terminated(r.job_name)) return "job name is not NUL-terminated";
  if (r.job_name[0] == '\0') return "job name is empty";
  return "";
}

std::string declaration_problem(const protocol::MemDeclare& m, size_t held, bool known) {
  if (m.device < 0 || m.device > protocol::kMaxDeviceIndex)
    return "declared memory on device " + std::to_string(m.device);
  if (m.bytes > kMaxAllocationBytes)
    return "declared an implausible allocation of " + std::to_string(m.bytes) + " bytes";
  if (m.kind > protocol::kMaxAllocKind || m.flags > protocol::kMemDeclareKnownFlags)
    return "declared memory with unknown kind/flags";
  bool reservation = m.flags & static_cast<uint32_t>(protocol::MemDeclareFlags::reservation);
  if (reservation != ((m.handle & protocol::kReservationTokenBit) != 0))
    return "declared a reservation without a token, or a token without a reservation";
  if (held >= kMaxAllocationsPerJob && !known)
    return "declared more than " + std::to_string(kMaxAllocationsPerJob) + " allocations";
  return "";
}

void ShimSessions::on_register(Connection& c, const protocol::RegisterRequest& r) {
  protocol::RegisterReply answer{};
  if (std::string problem = registration_problem(r); !problem.empty()) {
    answer.status = static_cast<uint32_t>(protocol::RegisterStatus::bad_request);
    protocol::copy_text(answer.message, problem.c_str());
    int fd = c.fd;
    if (hooks_.reply(c, protocol::MessageType::register_reply, &answer, sizeof answer, -1))
      hooks_.drop(fd, "bad registration: " + problem);
    return;
  }
  Job job;
  job.id = parts_.registry.next_id();
  job.connection = c.fd;
  job.peer = c.peer;
  job.client_pid = r.client_pid;
  job.name = printable_name(r.job_name);
  job.requested = static_cast<JobClass>(r.requested_class);
  job.granted = job.requested;
  job.devices.assign(r.devices, r.devices + r.device_count);
  job.registered = Clock::now();
  // The shim asks before its cuInit, registers after: a process told to be an MPS client is one.
  job.mps_client = hooks_.mps_client(c.peer.pid);
  // The job's pod, from the kernel: the cgroup of the SO_PEERCRED pid, never the message; and
  // its allocation, from the token the device plugin mounted into its container.
  ProcessPod found = pod_of_process(parts_.proc_root, c.peer.pid, parts_.config.kubernetes);
  job.peer.pod = found.pod;
  if (!found.cgroup_problem.empty())
    hooks_.warn("uid=" + std::to_string(c.peer.uid) + " cgroup",
                "register pid=" + std::to_string(c.peer.pid) + " uid=" +
                    std::to_string(c.peer.uid) + ": no pod identity: " + found.cgroup_problem);
  if (!found.allocation_problem.empty())
    hooks_.warn("allocations", "register pid=" + std::to_string(c.peer.pid) +
                                   ": no allocation: " + found.allocation_problem);

  std::string message = "registered";
  if (job.requested == JobClass::production &&
      !production_rule_for(parts_.config, job.peer, job.name)) {
    job.granted = JobClass::opportunistic;
    message = "production refused: no production rule in " + parts_.config_path + " matches uid " +
              std::to_string(c.peer.uid) + ", gid " + std::to_string(c.peer.gid) + ", job '" +
              job.name + "'; registered as opportunistic";
    spdlog::warn("refuse production pid={} uid={} gid={} job={}{}: no production rule matches",
                 c.peer.pid, c.peer.uid, c.peer.gid, log_text(job.name), pod_text(job.peer.pod));
    parts_.counters.refused(Refusal::production);
  }

  std::string error;
  job.block = SharedControlBlock::create(job.id, job.granted, &error);
  if (!job.block.valid()) {
    spdlog::error("register pid={} job={}: cannot create its control block: {}", c.peer.pid,
                  log_text(job.name), error);
    answer.status = static_cast<uint32_t>(protocol::RegisterStatus::unavailable);
    protocol::copy_text(answer.message, ("daemon cannot create a control block: " + error).c_str());
    hooks_.reply(c, protocol::MessageType::register_reply, &answer, sizeof answer, -1);
    return;
  }
  // Before the shim can allocate: whether its memory is made swappable (memory.oversubscribe).
  job.block.page()->swappable_memory.store(parts_.config.memory.oversubscribe &&
                                           job.granted == protocol::JobClass::opportunistic);

  answer.status = static_cast<uint32_t>(protocol::RegisterStatus::ok);
  answer.granted_class = static_cast<uint32_t>(job.granted);
  answer.job_id = job.id;
  protocol::copy_text(answer.message, message.c_str());
  if (!hooks_.reply(c, protocol::MessageType::register_reply, &answer, sizeof answer,
                    job.block.memfd()))
    return;                 // the client went away before its reply: nothing registered
  job.block.close_memfd();  // the shim holds its own descriptor now; our mapping stays

  hooks_.registered(c);
  c.job_id = job.id;
  spdlog::info("register pid={} uid={} gid={} job={}{} class={} requested={} devices={} id={}{}",
               c.peer.pid, c.peer.uid, c.peer.gid, log_text(job.name), pod_text(job.peer.pod),
               class_name(job.granted), class_name(job.requested), devices_text(job.devices),
               job.id,
               r.client_pid != static_cast<uint32_t>(c.peer.pid)
                   ? " client_pid=" + std::to_string(r.client_pid)
                   : std::string());
  parts_.registry.add(std::move(job));
  hooks_.jobs_changed();
}

void ShimSessions::on_mem_declare(Connection& c, const protocol::MemDeclare& m) {
  Job* job = parts_.registry.find(c.job_id);
  if (!job) return hooks_.drop(c.fd, "declared memory without a job");
  const bool known = job->memory.count({static_cast<int>(m.device), m.handle}) != 0;
  if (std::string problem = declaration_problem(m, job->memory.size(), known); !problem.empty())
    return hooks_.drop(c.fd, problem);
  // A handle declared twice (a re-declaration racing the allocation's own declaration after a
  // reconnect) simply replaces the first.
  spdlog::debug("alloc pid={} job={} device={} bytes={} flags={}", c.peer.pid, log_text(job->name),
                m.device, m.bytes, m.flags);
  hooks_.admit_memory(c, *job, m);  // memory_admission.cpp: admitted, refused, or deferred
}

void ShimSessions::on_mem_release(Connection& c, const protocol::MemRelease& m) {
  Job* job = parts_.registry.find(c.job_id);
  if (!job) return hooks_.drop(c.fd, "released memory without a job");
  if (m.reserved != 0) return hooks_.drop(c.fd, "released memory with a non-zero reserved field");
  // Unknown handles are normal after a reconnect (freed before the re-declaration): ignored.
  if (!job->erase_allocation({m.device, m.handle}))
    spdlog::debug("free pid={} job={}: unknown handle on device {}", c.peer.pid,
                  log_text(job->name), m.device);
  else
    hooks_.memory_released(*job, m.device);
}

void ShimSessions::set_job_class(Job& job, protocol::JobClass to, const Peer& by) {
  JobClass from = job.granted;
  job.granted = to;
  job.block.set_job_class(to);
  spdlog::info("priority pid={} job={} id={} {} -> {} by pid={} uid={}", job.peer.pid,
               log_text(job.name), job.id, class_name(from), class_name(to), by.pid, by.uid);
}

}  // namespace gpushare::daemon
