// gpushared's MPS control daemon (docs/mps.md), driven from the daemon's tick and never waited on:
// every program it runs (nvidia-smi, `nvidia-cuda-mps-control -d`, `quit`) is started with
// posix_spawn and reaped with waitpid(WNOHANG), so the event loop never blocks on MPS.
//
// `auto`:   check the compute mode (when nvidia-smi is there), then reuse a control daemon already
//           serving our pipe directory or start one; watch it every second; restart it with
//           back-off (1 s doubling to 5 min) when it dies; `quit` it at exit, killed after 5 s
//           (quit waits for every client to exit).
// `external`: someone else's control daemon at the configured pipe directory; only looked at.
// `off`:    nothing.
// Every failure is one log line naming it, logged again only when the reason changes; MPS is
// then simply not offered, and jobs run time-sliced.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "mps_access.h"
#include "mps_config.h"
#include "mps_control.h"

namespace gpushare::daemon {

class MpsSupervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // `runtime_directory`: where `auto` makes mps/pipe and mps/log (mps_runtime_directory()).
  void start(const MpsConfig& config, const std::string& runtime_directory, Clock::time_point now);
  void tick(Clock::time_point now);
  // A reload: mps_thread_percentage applies to later clients; a new mode or pipe directory only
  // after a restart (said in the log).
  void reload(const MpsConfig& next);
  // At daemon exit. True when there is a control daemon to stop: then keep ticking until
  // stopped() (at most kQuitTimeout).
  bool begin_stop(Clock::time_point now);
  bool stopped() const { return state_ == State::stopped; }

  MpsService service() const;     // for decide_mps_access
  nlohmann::json status() const;  // for `gpusharectl status`
  MpsMode mode() const { return config_.mode; }
  const std::string& pipe_directory() const { return pipe_; }

  static constexpr std::chrono::seconds kQuitTimeout{5};

 private:
  enum class State {
    off,
    external,
    checking_compute_mode,  // nvidia-smi running
    starting,               // `-d` running
    confirming,             // `-d` returned 0; looking for the daemon in /proc
    running,
    waiting_to_restart,
    failed,
    stopping,  // `quit` sent
    stopped,
  };
  static const char* state_name(State s);

  void check_compute_mode(Clock::time_point now);
  void compute_mode_checked(Clock::time_point now, std::optional<int> status);
  void start_control_daemon(Clock::time_point now);
  void fail(Clock::time_point now, const std::string& why);
  void adopt(const RunningControlDaemon& found, Clock::time_point now, const char* how);
  void kill_helper();
  std::map<std::string, std::string> mps_env() const;

  MpsConfig config_;
  State state_ = State::off;
  std::string pipe_;  // CUDA_MPS_PIPE_DIRECTORY of the control daemon and its clients
  std::string log_;   // CUDA_MPS_LOG_DIRECTORY (auto only)
  std::string error_;
  std::string last_logged_error_;
  std::string compute_mode_ = "not checked";
  SpawnedProgram helper_;         // the one program running for us now, if any
  Clock::time_point deadline_{};  // for the helper, or for confirming
  Clock::time_point retry_at_{};  // failed / waiting_to_restart
  Clock::time_point running_since_{};
  Clock::time_point next_check_{};  // liveness of the running daemon
  std::chrono::seconds backoff_{1};
  pid_t daemon_pid_ = -1;
  uid_t daemon_uid_ = 0;
};

}  // namespace gpushare::daemon
