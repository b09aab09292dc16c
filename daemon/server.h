// gpushared's event loop: one thread, epoll over the listening socket, every client connection, a
// signalfd (SIGHUP reload, SIGTERM/SIGINT stop) and a timerfd tick that samples control blocks.
//
// Every byte from a client is untrusted. A bad frame drops that client with one log line naming
// its pid and what was wrong; nothing a client sends can stop the daemon.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "authorization.h"
#include "config.h"
#include "connection_limits.h"
#include "connection_table.h"
#include "ctl_service.h"
#include "device_sessions.h"
#include "gpushare/protocol/wire.h"
#include "log_limiter.h"
#include "memory_service.h"
#include "metrics_endpoint.h"
#include "mps_sessions.h"
#include "mps_supervisor.h"
#include "policy_table.h"
#include "registry.h"
#include "scheduler.h"
#include "shim_sessions.h"

namespace gpushare::daemon {

class Server {
 public:
  // `config_path` is re-read on SIGHUP and `gpusharectl reload`.
  Server(Config config, std::string config_path);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // --log-level: wins over log_level of the file, on reload too.
  void override_log_level(std::string level) { log_level_override_ = std::move(level); }
  // --proc-root (tests only): where <pid>/cgroup is read to find a job's pod; default /proc.
  void set_proc_root(std::string root) { proc_root_ = std::move(root); }

  // Opens the socket (or takes the one systemd passed), then serves until SIGTERM or SIGINT.
  // Returns the process exit status.
  int run();

 private:
  // server.cpp: the loop and the connections.
  bool open();
  void accept_clients();
  // connections.cpp: the limits on who may hold how many connections (connection_limits.h).
  size_t reap_hung_up();
  void close_idle_connections(Clock::time_point now);
  void forget_connection(int fd);  // out of epoll, closed, out of the table
  // A warning keyed by client and reason, rate-limited by log_limiter_ (log_limiter.h).
  void warn_limited(const std::string& key, const std::string& line);
  void read_client(int fd);
  void handle_frame(Connection& c, const protocol::FrameHeader& h, const uint8_t* payload);
  void tick();
  void relay();  // the idle relay (Scheduler::relay), every kIdleRelayPeriod while armed
  bool handle_signals();  // false: stop
  void drop(int fd, const std::string& why);
  void disconnect(int fd);
  bool reply(Connection& c, protocol::MessageType type, const void* payload, size_t length,
             int pass_fd = -1);
  ConfigResult reload();
  void notify_status();

  // reply(), drop() and warn_limited() as every session component's hooks take them
  // (client_hooks.h).
  ReplyFrame reply_hook();
  DropClient drop_hook();
  WarnLimited warn_hook();

  // The shim sessions (shim_sessions.h) with the hooks they are given.
  ShimHooks shim_hooks();

  // The device sessions (device_sessions.h) with the hooks they are given.
  DeviceHooks device_hooks();
  // Every device the daemon knows of, as `gpusharectl status` and /metrics list them: with a policy
  // chosen, memory, a GPU in the inventory, a tick of the scheduler or a job scheduled there.
  std::set<int> known_devices();

  // The MPS sessions (mps_sessions.h) with the hooks they are given.
  MpsHooks mps_hooks();

  // The memory commands (memory_service.h) with the hooks they are given.
  MemoryHooks memory_hooks();

  // server.cpp: a JSON request from gpusharectl, framed; the ctl service (ctl_service.h) answers
  // it with the parts and hooks ctl_hooks() gives it.
  void on_ctl(Connection& c, const uint8_t* payload, size_t length);
  CtlHooks ctl_hooks();

  // metrics_collect.cpp: /metrics (docs/metrics.md), served on the endpoint's own thread from a
  // snapshot the tick publishes.
  void start_metrics();
  void publish_metrics();

  Config config_;
  std::string config_path_;
  std::string socket_path_;  // fixed at start; a changed socket.path needs a restart
  bool socket_activated_ = false;
  Registry registry_;
  PolicyTable policies_;  // each device's policy: the file's or gpusharectl's (policy_table.h)
  Scheduler scheduler_;
  ConnectionTable connections_;  // connection_table.h
  std::vector<uint8_t> buffer_;  // one received frame
  int epoll_ = -1;
  int listener_ = -1;
  int timer_ = -1;
  int relay_timer_ = -1;
  bool relay_armed_ = false;
  int signals_ = -1;
  int spare_fd_ = -1;  // released to accept-and-close when out of file descriptors
  Clock::time_point started_;
  uint64_t watchdog_usec_ = 0;
  Clock::time_point last_watchdog_;
  uint64_t dropped_clients_ = 0;
  // Connections: limits from max_clients, counts kept as connections come, change role and go.
  ConnectionLimits limits_;
  Clock::time_point last_idle_check_;
  LogLimiter log_limiter_;
  std::string log_level_override_;
  std::string proc_root_ = "/proc";
  DeviceSessions devices_;       // the GPUs by UUID, and the shim's question which its ordinals are
  MpsSupervisor mps_;            // docs/mps.md
  MpsClients mps_clients_;       // the processes told to be MPS clients, while they run
  bool stopping_ = false;        // a stop signal came; waiting for the MPS control daemon to quit
  DaemonCounters counters_;      // refusals, tick overruns, reloads (for /metrics)
  MetricsEndpoint metrics_;
  bool metrics_restart_noted_ = false;
  // Last: they hold references to the components above (the ctl service to the memory broker).
  MemoryService memory_;  // admission, swap, rotation, reservations (docs/memory.md)
  ShimSessions shims_;    // registration and memory declarations
  MpsSessions mps_sessions_;  // the shim's MPS question and the ctl's `mps` command
  CtlService ctl_;
};

}  // namespace gpushare::daemon
