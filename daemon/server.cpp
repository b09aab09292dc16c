#include "server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gpushare/protocol/ctl.h"
#include "gpushare/protocol/framing.h"
#include "logging.h"
#include "socket_io.h"

namespace gpushare::daemon {
namespace {

// Up to this many frames are read from one client per wake-up, so a chatty client cannot starve
// the others (epoll is level-triggered: the rest is read on the next round).
constexpr int kFramesPerWakeup = 16;

void arm_timer(int timer, std::chrono::milliseconds period) {
  itimerspec spec{};
  spec.it_interval.tv_sec = period.count() / 1000;
  spec.it_interval.tv_nsec = (period.count() % 1000) * 1000000;
  spec.it_value = spec.it_interval;
  timerfd_settime(timer, 0, &spec, nullptr);
}

bool watch(int epoll, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) == 0;
}

}  // namespace

Server::Server(Config config, std::string config_path)
    : config_(std::move(config)),
      config_path_(std::move(config_path)),
      buffer_(sizeof(protocol::FrameHeader) + protocol::kMaxPayload + 1),
      devices_(registry_, device_hooks()),
      memory_(MemoryParts{.config = config_,
                          .registry = registry_,
                          .counters = counters_,
                          .log_limiter = log_limiter_},
              memory_hooks()),
      shims_(ShimParts{.config = config_,
                       .config_path = config_path_,
                       .proc_root = proc_root_,
                       .registry = registry_,
                       .counters = counters_},
             shim_hooks()),
      mps_sessions_(MpsParts{.config = config_, .proc_root = proc_root_, .clients = mps_clients_},
                    mps_hooks()),
      ctl_(CtlParts{.config = config_,
                    .registry = registry_,
                    .policies = policies_,
                    .memory = memory_.broker(),
                    .inventory = devices_.inventory(),
                    .counters = counters_},
           ctl_hooks()) {
  limits_ = ConnectionLimits::for_max_clients(config_.max_clients);
  policies_.configure(config_);
}

Server::~Server() {
  for (auto& [fd, c] : connections_) ::close(fd);
  for (int fd : {epoll_, listener_, timer_, signals_, spare_fd_})
    if (fd >= 0) ::close(fd);
  if (!socket_activated_ && !socket_path_.empty()) ::unlink(socket_path_.c_str());
}

ReplyFrame Server::reply_hook() {
  return [this](Connection& c, protocol::MessageType type, const void* payload, size_t length) {
    return reply(c, type, payload, length);
  };
}

DropClient Server::drop_hook() {
  return [this](int fd, const std::string& why) { drop(fd, why); };
}

WarnLimited Server::warn_hook() {
  return [this](const std::string& key, const std::string& line) { warn_limited(key, line); };
}

ShimHooks Server::shim_hooks() {
  return {
      .reply = [this](Connection& c, protocol::MessageType type, const void* payload, size_t length,
                      int pass_fd) { return reply(c, type, payload, length, pass_fd); },
      .drop = drop_hook(),
      .registered = [this](Connection& c) { connections_.set_role(c, Connection::Role::shim); },
      .warn = warn_hook(),
      .mps_client = [this](pid_t pid) { return mps_clients_.contains(pid); },
      .admit_memory = [this](Connection& c, Job& job,
                             const protocol::MemDeclare& m) { memory_.admit(c, job, m); },
      .memory_released = [this](Job& job, int device) { memory_.released(job, device); },
      .jobs_changed = [this] { notify_status(); },
  };
}

DeviceHooks Server::device_hooks() {
  return {
      .load = GpuInventory::from_nvml,
      .reply = reply_hook(),
      .drop = drop_hook(),
      .warn = warn_hook(),
  };
}

std::set<int> Server::known_devices() {
  std::set<int> devices = policies_.devices();
  for (const auto& [device, bytes] : memory_.broker().physical) devices.insert(device);
  for (const auto& [uuid, device] : devices_.inventory().index_of) devices.insert(device);
  for (const auto& [device, status] : scheduler_.device_status()) devices.insert(device);
  for (auto& [id, job] : registry_.jobs())
    for (int d : Scheduler::devices_of(job)) devices.insert(d);
  return devices;
}

MpsHooks Server::mps_hooks() {
  return {
      .reply = reply_hook(),
      .drop = drop_hook(),
      .service = [this] { return mps_.service(); },
      .mode = [this] { return mps_.mode(); },
      .status = [this] { return mps_.status(); },
      .alive = process_alive,
  };
}

MemoryHooks Server::memory_hooks() {
  return {
      .reply =
          [this](Connection& c, const protocol::MemReply& answer) {
            reply(c, protocol::MessageType::mem_reply, &answer, sizeof answer);
          },
      .connection = [this](int fd) { return connections_.find(fd); },
      .drop = drop_hook(),
      .warn = warn_hook(),
  };
}

CtlHooks Server::ctl_hooks() {
  return {
      .facts =
          [this] {
            return DaemonFacts{
                .uptime_s = std::chrono::duration<double>(Clock::now() - started_).count(),
                .config_path = config_path_,
                .socket_path = socket_path_,
                .proc_root = proc_root_,
                .socket_activated = socket_activated_,
                .clients = connections_.size(),
                .dropped_clients = dropped_clients_};
          },
      .known_devices = [this] { return known_devices(); },
      .rotation = [this](int device) { return memory_.rotation_json(device); },
      .policy_state =
          [this](int device) {
            auto it = scheduler_.device_status().find(device);
            if (it == scheduler_.device_status().end()) return nlohmann::json(nullptr);
            const std::string explanation = scheduler_.explain(device);
            const std::optional<double> progress = it->second.production_progress;
            return nlohmann::json{
                {"production_progress", progress ? nlohmann::json(*progress) : nullptr},
                {"explanation",
                 explanation.empty() ? nlohmann::json(nullptr) : nlohmann::json(explanation)}};
          },
      .set_class = [this](Job& job, protocol::JobClass to,
                          const Peer& by) { shims_.set_job_class(job, to, by); },
      .reload = [this] { return reload(); },
  };
}

void Server::on_ctl(Connection& c, const uint8_t* payload, size_t length) {
  using nlohmann::json;
  json request = json::parse(payload, payload + length, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object() ||
      !request.contains(protocol::ctl::kCommand) || !request[protocol::ctl::kCommand].is_string())
    return drop(c.fd, "sent a ctl request that is not a JSON object with a \"command\" string");
  const json answer = ctl_.answer(c.peer, request);
  std::string text = answer.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > protocol::kMaxPayload)
    text = json{{"ok", false},
                {"error", "the reply (" + std::to_string(text.size()) +
                              " bytes) is over the protocol's " +
                              std::to_string(protocol::kMaxPayload) + "-byte limit"}}
               .dump();
  // A SOCK_SEQPACKET frame must fit the sender's buffer whole; the kernel caps this at wmem_max.
  int sndbuf = static_cast<int>(text.size() + 4096);
  if (text.size() > 64 * 1024) setsockopt(c.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  reply(c, protocol::MessageType::ctl_reply, text.data(), text.size());
}

bool Server::open() {
  started_ = Clock::now();
  std::string error;
  int passed = sd_listen_fds(1);
  if (passed == 1 && sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, nullptr, 0) > 0) {
    listener_ = SD_LISTEN_FDS_START;
    socket_activated_ = true;
    fcntl(listener_, F_SETFL, fcntl(listener_, F_GETFL) | O_NONBLOCK);
    socket_path_ = "(socket activation)";
    spdlog::info("using the listening socket passed by systemd; socket.* in the config is ignored");
  } else {
    if (passed > 0) spdlog::warn("ignoring {} unexpected sockets passed by systemd", passed);
    socket_path_ = config_.socket_path;
    listener_ = listen_unix(socket_path_, config_.socket_mode, config_.socket_group, &error);
    if (listener_ < 0) {
      spdlog::critical("cannot listen: {}", error);
      socket_path_.clear();
      return false;
    }
  }

  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signals_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  relay_timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (signals_ < 0 || timer_ < 0 || relay_timer_ < 0 || epoll_ < 0 ||
      !watch(epoll_, listener_) || !watch(epoll_, signals_) || !watch(epoll_, timer_) ||
      !watch(epoll_, relay_timer_)) {
    spdlog::critical("cannot set up the event loop: {}", std::strerror(errno));
    return false;
  }
  arm_timer(timer_, config_.tick);
  if (sd_watchdog_enabled(0, &watchdog_usec_) <= 0) watchdog_usec_ = 0;
  return true;
}

int Server::run() {
  if (!open()) return 1;
  spdlog::info("listening on {} (tick {} ms, policy {}, config {})", socket_path_,
               config_.tick.count(), config_.default_policy, config_path_);
  devices_.load(Clock::now());
  mps_.start(config_.mps,
             mps_runtime_directory(config_.socket_path, std::getenv("RUNTIME_DIRECTORY")),
             Clock::now());
  start_metrics();
  memory_.start();  // the NVML sampler that checks declarations, when configured
  sd_notify(0, "READY=1");
  notify_status();
  epoll_event events[64];
  for (;;) {
    int n = epoll_wait(epoll_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::critical("epoll_wait: {}", std::strerror(errno));
      return 1;
    }
    // New connections are accepted after this round's reads, so the EOFs of clients that already
    // left are seen before newcomers are counted against the limits.
    bool accept_now = false;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener_) {
        accept_now = true;
      } else if (fd == timer_) {
        tick();
      } else if (fd == relay_timer_) {
        relay();
      } else if (fd == signals_) {
        if (!handle_signals() && !stopping_) {
          sd_notify(0, "STOPPING=1");
          spdlog::info("stopping ({} jobs registered)", registry_.size());
          // MPS's quit waits for its clients: the loop keeps serving until it is done (bounded).
          stopping_ = true;
          if (!mps_.begin_stop(Clock::now())) return 0;
        }
      } else {
        read_client(fd);
      }
    }
    if (accept_now) accept_clients();
    if (stopping_ && mps_.stopped()) return 0;
  }
}

void Server::accept_clients() {
  bool reaped = false;
  for (;;) {
    int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: accept and close one pending client, or the level-triggered listener
        // would wake the loop forever.
        spdlog::error("out of file descriptors: refusing a connection");
        ::close(spare_fd_);
        int refused = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (refused >= 0) ::close(refused);
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: none left
    }
    Connection c;
    c.fd = fd;
    if (!peer_identity(fd, &c.peer)) {
      spdlog::warn("refusing a connection: SO_PEERCRED failed: {}", std::strerror(errno));
      ::close(fd);
      continue;
    }
    // Gone before we got to it (a connect-and-close burst): costs neither a slot nor a log line.
    pollfd hung{fd, POLLRDHUP, 0};
    if (poll(&hung, 1, 0) > 0 && (hung.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
      ::close(fd);
      continue;
    }
    c.admin = may_administer(config_, c.peer).allowed;
    c.last_active = Clock::now();
    std::optional<std::string> refusal =
        refuse_connection(limits_, connections_.counts_for(c.peer), c.admin);
    if (refusal && !reaped) {  // once per round: connections that left may have made room
      reaped = true;
      if (reap_hung_up() > 0)
        refusal = refuse_connection(limits_, connections_.counts_for(c.peer), c.admin);
    }
    if (refusal) {
      warn_limited(
          "uid=" + std::to_string(c.peer.uid) + " refuse connection: " + reason_kind(*refusal),
          "refusing pid=" + std::to_string(c.peer.pid) + " uid=" + std::to_string(c.peer.uid) +
              ": " + *refusal);
      counters_.refused(Refusal::max_clients);
      ::close(fd);
      continue;
    }
    if (!watch(epoll_, fd)) {
      ::close(fd);
      continue;
    }
    connections_.add(std::move(c));
  }
}

void Server::read_client(int fd) {
  for (int frame = 0; frame < kFramesPerWakeup; ++frame) {
    Connection* found = connections_.find(fd);
    if (!found) return;
    Connection& c = *found;
    protocol::Received r =
        protocol::receive_frame(fd, buffer_.data(), buffer_.size(), MSG_DONTWAIT);
    const ssize_t n = r.bytes;
    if (n < 0) {
      if (r.error == EAGAIN) return;
      return disconnect(fd);  // ECONNRESET and friends: the client is gone
    }
    const bool passed_fds = r.any_fds();
    r.close_fds();  // the daemon accepts none
    if (n == 0) return disconnect(fd);  // orderly close (SOCK_SEQPACKET reads 0 only at EOF)
    if (passed_fds) return drop(fd, "sent file descriptors (the daemon accepts none)");
    c.last_active = Clock::now();
    if (r.truncated)
      return drop(fd,
                  "sent a frame over the " + std::to_string(buffer_.size() - 1) + "-byte limit");
    protocol::FrameHeader h{};
    protocol::FrameError e = protocol::check_frame(buffer_.data(), static_cast<size_t>(n), &h);
    if (e == protocol::FrameError::bad_version) {
      protocol::ErrorReply error{};
      error.code = static_cast<uint32_t>(protocol::ErrorCode::unsupported_version);
      protocol::copy_text(error.message, ("this daemon speaks protocol version " +
                                          std::to_string(protocol::kWireVersion))
                                             .c_str());
      reply(c, protocol::MessageType::error, &error, sizeof error);
    }
    if (e != protocol::FrameError::none) {
      return drop(fd, std::string("bad frame: ") + protocol::describe(e) + " (" +
                          std::to_string(n) + " bytes, type " + std::to_string(h.type) +
                          ", version " + std::to_string(h.version) + ", length " +
                          std::to_string(h.length) + ")");
    }
    handle_frame(c, h, buffer_.data() + sizeof h);
  }
}

void Server::handle_frame(Connection& c, const protocol::FrameHeader& h, const uint8_t* payload) {
  using protocol::MessageType;
  using Role = Connection::Role;
  switch (static_cast<MessageType>(h.type)) {
    case MessageType::register_request: {
      if (c.role != Role::unknown) return drop(c.fd, "sent a second registration");
      protocol::RegisterRequest r;
      std::memcpy(&r, payload, sizeof r);
      return shims_.on_register(c, r);
    }
    case MessageType::mem_declare: {
      if (c.role != Role::shim) return drop(c.fd, "declared memory before registering");
      protocol::MemDeclare m;
      std::memcpy(&m, payload, sizeof m);
      return shims_.on_mem_declare(c, m);
    }
    case MessageType::mem_release: {
      if (c.role != Role::shim) return drop(c.fd, "released memory before registering");
      protocol::MemRelease m;
      std::memcpy(&m, payload, sizeof m);
      return shims_.on_mem_release(c, m);
    }
    case MessageType::device_info: {
      if (c.role != Role::shim) return drop(c.fd, "sent device info before registering");
      protocol::DeviceInfo d;
      std::memcpy(&d, payload, sizeof d);
      return memory_.on_device_info(c, d);
    }
    case MessageType::alloc_site: {
      if (c.role != Role::shim)
        return drop(c.fd, "announced an allocation site before registering");
      protocol::AllocSite a;
      std::memcpy(&a, payload, sizeof a);
      return memory_.on_alloc_site(c, a);
    }
    case MessageType::device_uuids: {
      if (c.role != Role::shim) return drop(c.fd, "sent device UUIDs before registering");
      protocol::DeviceUuids u;
      std::memcpy(&u, payload, sizeof u);
      return devices_.on_uuids(c, u, Clock::now());
    }
    case MessageType::mps_query: {
      if (c.role == Role::ctl) return drop(c.fd, "sent an MPS query on a ctl connection");
      protocol::MpsQuery q;
      std::memcpy(&q, payload, sizeof q);
      return mps_sessions_.on_query(c, q);
    }
    case MessageType::ctl_request:
      if (c.role == Role::shim) return drop(c.fd, "sent a ctl request on a shim connection");
      if (c.role != Role::ctl) connections_.set_role(c, Role::ctl);
      if (mps_sessions_.answer_ctl(c, payload, h.length)) return;
      return on_ctl(c, payload, h.length);
    default:
      return drop(c.fd,
                  "sent a message only the daemon sends (type " + std::to_string(h.type) + ")");
  }
}

void Server::drop(int fd, const std::string& why) {
  const Connection* found = connections_.find(fd);
  if (!found) return;
  const Connection& c = *found;
  const Job* job = c.job_id ? registry_.find(c.job_id) : nullptr;
  // Keyed by uid and the kind of reason: a client that keeps sending garbage writes a few lines
  // and then one "suppressed N" summary per window.
  warn_limited("uid=" + std::to_string(c.peer.uid) + " drop: " + reason_kind(why),
               "drop pid=" + std::to_string(c.peer.pid) + " uid=" + std::to_string(c.peer.uid) +
                   (job ? " job=" + log_text(job->name) : std::string()) + ": " + why);
  ++dropped_clients_;
  if (job) registry_.remove(c.job_id);
  forget_connection(fd);
  if (job) notify_status();
}

void Server::disconnect(int fd) {
  const Connection* found = connections_.find(fd);
  if (!found) return;
  const Connection& c = *found;
  if (const Job* job = c.job_id ? registry_.find(c.job_id) : nullptr) {
    spdlog::info("unregister pid={} job={} id={}: connection closed", c.peer.pid,
                 log_text(job->name), job->id);
    registry_.remove(c.job_id);
  }
  bool had_job = c.job_id != 0;
  forget_connection(fd);
  if (had_job) notify_status();
}

bool Server::reply(Connection& c, protocol::MessageType type, const void* payload, size_t length,
                   int pass_fd) {
  switch (protocol::send_frame(c.fd, type, payload, length, pass_fd, MSG_DONTWAIT)) {
    case protocol::SendResult::sent:
      return true;
    case protocol::SendResult::would_block:
      drop(c.fd, "does not read its replies");
      return false;
    case protocol::SendResult::failed:
      disconnect(c.fd);
      return false;
  }
  return false;
}

void Server::relay() {
  uint64_t expirations;
  while (::read(relay_timer_, &expirations, sizeof expirations) > 0) {
  }
  if (relay_armed_) scheduler_.relay(registry_, Clock::now());
}

void Server::tick() {
  uint64_t expirations;
  while (::read(timer_, &expirations, sizeof expirations) > 0) {
    if (expirations > 1) counters_.tick_overruns += expirations - 1;
  }
  Clock::time_point now = Clock::now();
  registry_.sample(now);
  scheduler_.tick(registry_, now, [this](int device) { return policies_.choice_for(device); });
  // The idle relay runs only while some job is idle-gated (Gate::production_idle_only) or some
  // policy measures production's busy time (Gate::measure_production).
  if (scheduler_.relaying() != relay_armed_) {
    relay_armed_ = scheduler_.relaying();
    itimerspec spec{};
    if (relay_armed_) {
      spec.it_interval.tv_nsec =
          std::chrono::duration_cast<std::chrono::nanoseconds>(kIdleRelayPeriod).count();
      spec.it_value = spec.it_interval;
    }
    timerfd_settime(relay_timer_, 0, &spec, nullptr);
  }
  // memory_service.h: swap acknowledgements, waiting allocations, swap-in or rotation, expired
  // reservations, declarations against NVML.
  memory_.tick(now);
  mps_.tick(now);  // mps_supervisor.cpp: the MPS control daemon's programs, liveness, restart
  close_idle_connections(now);  // connections.cpp
  log_limiter_.flush(now, [](const std::string& key, uint64_t suppressed) {
    spdlog::warn("suppressed {} more log lines of {}", suppressed, key);
  });
  publish_metrics();  // metrics_collect.cpp: a snapshot for the /metrics thread, when it serves
  if (watchdog_usec_ && now - last_watchdog_ >= std::chrono::microseconds(watchdog_usec_ / 4)) {
    sd_notify(0, "WATCHDOG=1");
    last_watchdog_ = now;
  }
}

bool Server::handle_signals() {
  signalfd_siginfo info;
  bool keep_running = true;
  while (::read(signals_, &info, sizeof info) == sizeof info) {
    if (info.ssi_signo == SIGHUP) {
      spdlog::info("SIGHUP: reloading {}", config_path_);
      reload();
    } else {
      spdlog::info("signal {} from pid {}", strsignal(static_cast<int>(info.ssi_signo)),
                   info.ssi_pid);
      keep_running = false;
    }
  }
  return keep_running;
}

ConfigResult Server::reload() {
  sd_notify(0, "RELOADING=1");
  ConfigResult result = load_config(config_path_);
  if (!result.config) {
    spdlog::error("reload of {} failed, the previous configuration stays in force: {}",
                  config_path_, result.error_text());
    ++counters_.failed_reloads;
    sd_notify(0, "READY=1");
    return result;
  }
  Config next = std::move(*result.config);
  if (!socket_activated_) {
    if (next.socket_path != config_.socket_path)
      spdlog::warn("socket.path changed to {}: takes effect after a restart", next.socket_path);
    std::string error;
    if (!set_socket_access(socket_path_, next.socket_mode, next.socket_group, &error))
      spdlog::error("reload: cannot apply socket mode/group: {}", error);
  }
  if (next.tick != config_.tick) arm_timer(timer_, next.tick);
  mps_.reload(next.mps);
  set_log_level(log_level_override_.empty() ? next.log_level : log_level_override_);
  for (const std::string& w : config_warnings(next)) spdlog::warn("config {}: {}", config_path_, w);
  config_ = std::move(next);
  policies_.configure(config_);  // the file decides again; documented in docs/daemon.md
  limits_ = ConnectionLimits::for_max_clients(config_.max_clients);
  result.config = config_;
  ++counters_.reloads;
  spdlog::info("reloaded {} ({} production rules, tick {} ms, policy {})", config_path_,
               config_.production_rules.size(), config_.tick.count(), config_.default_policy);
  sd_notify(0, "READY=1");
  return result;
}

void Server::notify_status() {
  sd_notifyf(0, "STATUS=%zu jobs registered", registry_.size());
}

}  // namespace gpushare::daemon
