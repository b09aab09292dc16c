// Admission of declared memory against the device capacity and the jobs' limits (docs/memory.md):
// the I/O around policies::decide_admission, which makes the decision.
// A declaration arrives BEFORE the allocation is made; the reply admits or refuses it (the shim
// then returns CUDA_ERROR_OUT_OF_MEMORY), or is deferred while opportunistic jobs move their
// memory to host to make room for a production allocation.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "gpushare/policies/admission.h"
#include "logging.h"
#include "memory_service.h"

namespace gpushare::daemon {
namespace {

using protocol::JobClass;
using protocol::MemDeclareFlags;

// A program that handles an out-of-memory error retries a few times (PyTorch frees its cache and
// retries once); one refused this many times in a row without a single admitted request is
// looping, and its requests and log lines would cost the daemon without end.
constexpr uint32_t kMaxRefusalsInARow = 500;

bool has(uint32_t flags, MemDeclareFlags f) {
  return flags & static_cast<uint32_t>(f);
}

// Pitched allocations are rounded up to the row pitch: a commit may exceed its reservation by
// this much (or by the reservation's own size, for narrow rows).
constexpr uint64_t kCommitSlack = uint64_t{2} << 20;

// The admitted, unclaimed reservation of `job` on `device` that covers a commit of `bytes`
// (claimed by it: from then on the commit holds its bytes, held_bytes), or false: a commit must
// follow its reservation, else it is checked like one.
bool claim_reservation(Job& job, int device, uint64_t bytes) {
  auto from = job.memory.lower_bound({device, protocol::kReservationTokenBit});
  for (auto it = from; it != job.memory.end() && it->first.first == device; ++it) {
    const DeclaredAllocation& r = it->second;
    if (r.claimed || !has(r.flags, MemDeclareFlags::reservation)) continue;
    if (bytes > r.bytes + std::max(r.bytes, kCommitSlack)) continue;
    DeclaredAllocation claimed = r;
    claimed.claimed = true;
    job.set_allocation(it->first, claimed);  // the job's sums no longer count its bytes
    return true;
  }
  return false;
}

uint64_t pending_bytes(const MemoryBroker& broker, int device) {
  uint64_t total = 0;
  for (const PendingAdmission& p : broker.pending)
    if (p.device == device) total += p.bytes;
  return total;
}

}  // namespace

void MemoryService::start() {
  nvml_ = start_nvml_sampler(parts_.config.memory.nvml_sample);  // nvml_usage.h; nullptr: off
}

void MemoryService::admit(Connection& c, Job& job, const protocol::MemDeclare& m) {
  const int device = m.device;
  auto key = std::make_pair(device, m.handle);
  DeclaredAllocation allocation{m.bytes, m.kind, m.flags, m.site, Clock::now(), false};
  auto grant = [&] {
    job.refused_in_a_row = 0;
    job.set_allocation(key, allocation);
    publish_views(parts_.registry, broker_, parts_.config.memory);
    hooks_.reply(c, protocol::MemReply{static_cast<uint32_t>(protocol::MemStatus::admitted), 0});
  };
  auto refuse = [&](const std::string& why) {
    // A few lines per job and reason, then one "suppressed N" summary per window (log_limiter.h);
    // a job that keeps asking for what it is refused is dropped.
    if (parts_.log_limiter.admit(
            "job=" + std::to_string(job.id) + " refuse alloc: " + reason_kind(why), Clock::now()))
      spdlog::info("refuse alloc pid={} job={} id={} device={} bytes={}: {}", job.peer.pid,
                   log_text(job.name), job.id, device, m.bytes, why);
    parts_.counters.refused(Refusal::alloc);
    if (++job.refused_in_a_row > kMaxRefusalsInARow)
      return hooks_.drop(c.fd, "asked for memory it was refused " +
                                   std::to_string(kMaxRefusalsInARow) + " times in a row");
    hooks_.reply(c, protocol::MemReply{static_cast<uint32_t>(protocol::MemStatus::refused), 0});
  };
  // Made under an admitted reservation: the memory exists and was admitted already. Anything else
  // that is not a reservation (a commit with no reservation, a re-declaration after a reconnect)
  // is checked like one, or a client could declare past its limit and the capacity at will.
  if (!has(m.flags, MemDeclareFlags::reservation) && has(m.flags, MemDeclareFlags::committed) &&
      claim_reservation(job, device, m.bytes))
    return grant();

  const MemoryConfig& config = parts_.config.memory;
  const bool opportunistic = job.granted == JobClass::opportunistic;
  const SwapState state = job.memory_state.state;
  policies::AdmissionRequest request{
      .job_class = job.granted,
      .bytes = m.bytes,
      .movable = has(m.flags, MemDeclareFlags::swappable),
      // Prefetched only in part: the shim puts a new allocation on host with the rest.
      .job_on_host = state == SwapState::swapping_out || state == SwapState::swapped_out ||
                     (state == SwapState::prefetched &&
                      job_swappable_resident(job, device) < job_swappable(job, device)),
      .job_bytes = job_bytes(job, device),
      .limit = job_limit(config, job)};
  std::optional<policies::DeviceMemory> memory;
  if (std::optional<uint64_t> capacity = broker_.capacity(config, device)) {
    const DeviceMemoryUse use = device_use(parts_.registry, device);
    memory = policies::DeviceMemory{.capacity = *capacity,
                                    .resident = use.resident,
                                    .evictable = use.evictable,
                                    .leaving = use.leaving,
                                    .waiting = pending_bytes(broker_, device)};
  }
  const policies::Admission decision = policies::decide_admission(
      request, memory, opportunistic ? std::vector<policies::MovableJob>{} : movable_jobs(device));

  using policies::AdmissionVerdict;
  switch (decision.verdict) {
    case AdmissionVerdict::admit:
      return grant();
    case AdmissionVerdict::admit_on_host:
      // Opportunistic jobs wait instead of failing: admitted, and moved to host until room returns.
      grant();
      request_residency(job, /*to_host=*/true, Clock::now());
      return;
    case AdmissionVerdict::refuse_over_limit:
      return refuse("over its limit of " + std::to_string(request.limit.value_or(0)) + " bytes");
    case AdmissionVerdict::refuse_device_full:
      return refuse("the device is full (" + std::to_string(memory->capacity) + " bytes)");
    case AdmissionVerdict::refuse_beyond_capacity:
      return refuse("production memory would exceed the capacity of " +
                    std::to_string(memory->capacity) +
                    " bytes even with every opportunistic job on host");
    case AdmissionVerdict::wait_for_room:
      break;
  }
  // Production waits behind earlier production allocations of the device while the chosen
  // opportunistic jobs move to host.
  Clock::time_point now = Clock::now();
  swap_out(decision.swap_out, job, device, now);
  broker_.pending.push_back(PendingAdmission{job.id, c.fd, device, m.handle, m.bytes, m.kind,
                                             m.flags, m.site, now + config.swap_timeout});
  // Served at once when it already fits, else on a later tick, once the victims have answered.
  serve_waiters(now);
}

std::vector<policies::MovableJob> MemoryService::movable_jobs(int device) {
  std::vector<policies::MovableJob> candidates;
  for (auto& [id, other] : parts_.registry.jobs()) {
    const SwapState s = other.memory_state.state;
    // Without a control block a job cannot be asked to move (request_residency).
    if (other.granted == JobClass::opportunistic && other.block.page() &&
        (s == SwapState::resident || s == SwapState::swapping_in || s == SwapState::prefetched))
      candidates.push_back({id, job_swappable_resident(other, device)});
  }
  return candidates;
}

void MemoryService::swap_out(const std::vector<uint64_t>& victims, const Job& for_job, int device,
                             Clock::time_point now) {
  for (uint64_t victim_id : victims) {
    Job* victim = parts_.registry.find(victim_id);
    if (!victim) continue;
    spdlog::info("swap-out job={} id={} device={} bytes={}: production job={} needs room",
                 log_text(victim->name), victim->id, device,
                 job_swappable_resident(*victim, device), log_text(for_job.name));
    request_residency(*victim, /*to_host=*/true, now);
  }
}

void MemoryService::expire_reservations(Clock::time_point now) {
  bool expired = false;
  for (auto& [id, job] : parts_.registry.jobs()) {
    if (job.reservations == 0) continue;  // most jobs, most of the time: nothing to walk
    for (auto it = job.memory.begin(); it != job.memory.end();) {
      const DeclaredAllocation& a = it->second;
      if (!has(a.flags, MemDeclareFlags::reservation) || now - a.admitted < kReservationLifetime) {
        ++it;
        continue;
      }
      if (parts_.log_limiter.admit("job=" + std::to_string(job.id) + " expire reservation", now))
        spdlog::warn(
            "expire reservation pid={} job={} id={} device={} bytes={}: not used within "
            "{} s",
            job.peer.pid, log_text(job.name), job.id, it->first.first, a.bytes,
            std::chrono::duration_cast<std::chrono::seconds>(kReservationLifetime).count());
      it = job.erase_allocation(it);
      expired = true;
    }
  }
  if (expired) publish_views(parts_.registry, broker_, parts_.config.memory);
}

void MemoryService::check_declarations(Clock::time_point now) {
  if (!nvml_) return;
  std::optional<NvmlReading> reading = nvml_->take_new(&nvml_seen_);  // never waits for NVML
  if (!reading) return;
  policies::DeclarationCheckParams params;
  params.grace = parts_.config.memory.declaration_grace;
  if (declaration_audit_.apply(parts_.registry, *reading, params, now, parts_.log_limiter)) {
    publish_views(parts_.registry, broker_, parts_.config.memory);
    serve_waiters(now);  // room a waiting production allocation may take
  }
}

void MemoryService::answer(uint64_t job_id, int fd, bool admitted) {
  Connection* c = hooks_.connection(fd);
  if (!c || c->job_id != job_id) return;  // gone meanwhile
  hooks_.reply(*c,
               protocol::MemReply{static_cast<uint32_t>(admitted ? protocol::MemStatus::admitted
                                                                 : protocol::MemStatus::refused),
                                  0});
}

void MemoryService::released(Job&, int) {
  publish_views(parts_.registry, broker_, parts_.config.memory);
}

void MemoryService::on_device_info(Connection& c, const protocol::DeviceInfo& d) {
  if (d.device < 0 || d.device > protocol::kMaxDeviceIndex || d.reserved != 0)
    return hooks_.drop(c.fd, "sent device info for device " + std::to_string(d.device));
  uint64_t& known = broker_.physical[d.device];
  if (known != d.total_bytes) {
    spdlog::info("device {}: {} bytes of physical memory (reported by pid={})", d.device,
                 d.total_bytes, c.peer.pid);
    known = d.total_bytes;
    publish_views(parts_.registry, broker_, parts_.config.memory);
  }
}

void MemoryService::on_alloc_site(Connection& c, const protocol::AllocSite& s) {
  Job* job = parts_.registry.find(c.job_id);
  if (!job) return hooks_.drop(c.fd, "announced an allocation site without a job");
  if (s.site == 0 || s.reserved != 0 || !protocol::terminated(s.text))
    return hooks_.drop(c.fd, "announced a malformed allocation site");
  constexpr size_t kMaxSites = 4096;  // bounds what one client can make the daemon keep
  if (job->memory_state.sites.size() >= kMaxSites && !job->memory_state.sites.count(s.site)) return;
  std::string text(s.text);
  for (char& ch : text)
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
  job->memory_state.sites[s.site] = text;
}

}  // namespace gpushare::daemon
