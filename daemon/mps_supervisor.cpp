#include "mps_supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

namespace gpushare::daemon {
namespace {

constexpr std::chrono::seconds kHelperTimeout{10};  // nvidia-smi, `-d`
constexpr std::chrono::seconds kConfirmTimeout{5};  // `-d` returned 0: the daemon must show up
constexpr std::chrono::seconds kLivenessPeriod{1};
constexpr std::chrono::seconds kMaxBackoff{300};
constexpr std::chrono::seconds kStableAfter{60};  // running this long resets the back-off

bool make_directory(const std::string& path, mode_t mode, std::string* error) {
  if (mkdir(path.c_str(), mode) == 0 || errno == EEXIST) return true;
  *error = "cannot create " + path + ": " + std::strerror(errno);
  return false;
}

long seconds_until(std::chrono::steady_clock::time_point t,
                   std::chrono::steady_clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::seconds>(t - now).count();
}

}  // namespace

const char* MpsSupervisor::state_name(State s) {
  switch (s) {
    case State::off:
      return "off";
    case State::external:
      return "external";
    case State::checking_compute_mode:
    case State::starting:
    case State::confirming:
      return "starting";
    case State::running:
      return "running";
    case State::waiting_to_restart:
      return "restarting";
    case State::failed:
      return "failed";
    case State::stopping:
      return "stopping";
    case State::stopped:
      return "stopped";
  }
  return "?";
}

std::map<std::string, std::string> MpsSupervisor::mps_env() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", pipe_}, {"CUDA_MPS_LOG_DIRECTORY", log_}};
}

void MpsSupervisor::start(const MpsConfig& config, const std::string& runtime_directory,
                          Clock::time_point now) {
  config_ = config;
  switch (config.mode) {
    case MpsMode::off:
      state_ = State::off;
      return;
    case MpsMode::external: {
      state_ = State::external;
      pipe_ = config.pipe_directory.value_or(kMpsDefaultPipeDirectory);
      MpsService s = service();
      if (s.available)
        spdlog::info("mps external: jobs become clients of the MPS control daemon at {} (uid {})",
                     pipe_, s.owner_uid);
      else
        spdlog::warn("mps external: {}; jobs run time-sliced until one runs there", s.unavailable);
      return;
    }
    case MpsMode::automatic:
      break;
  }
  std::string root = runtime_directory + "/mps";
  pipe_ = root + "/pipe";
  log_ = root + "/log";
  std::string error;
  // 0755: clients of every user must reach the pipes; MPS itself sets the modes of what it makes.
  if (!make_directory(root, 0755, &error) || !make_directory(pipe_, 0755, &error) ||
      !make_directory(log_, 0755, &error))
    return fail(now, "MPS not started: " + error);
  check_compute_mode(now);
}

void MpsSupervisor::check_compute_mode(Clock::time_point now) {
  std::optional<std::string> smi = find_on_path("nvidia-smi", std::getenv("PATH"));
  if (!smi) {
    compute_mode_ = "not checked (nvidia-smi not found)";
    spdlog::info("mps: compute mode not checked: nvidia-smi is not on PATH");
    return start_control_daemon(now);
  }
  std::string error;
  helper_ = spawn_program({*smi, "--query-gpu=compute_mode", "--format=csv,noheader"}, {},
                          std::nullopt, log_ + "/gpushared-compute-mode.txt", &error);
  if (helper_.pid < 0) {
    compute_mode_ = "not checked (cannot run nvidia-smi: " + error + ")";
    return start_control_daemon(now);
  }
  state_ = State::checking_compute_mode;
  deadline_ = now + kHelperTimeout;
}

void MpsSupervisor::compute_mode_checked(Clock::time_point now, std::optional<int> status) {
  std::string output = read_text_file(helper_.output_path);
  helper_ = {};
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    compute_mode_ = "not checked (nvidia-smi " +
                    (status ? describe_wait_status(*status) + ": " + last_line(output)
                            : std::string("did not answer within 10 s")) +
                    ")";
    spdlog::warn("mps: compute mode {}", compute_mode_);
    return start_control_daemon(now);
  }
  ComputeModes modes = parse_compute_modes(output);
  auto list = [](const std::vector<int>& gpus) {
    std::string text;
    for (int g : gpus) text += (text.empty() ? "" : ",") + std::to_string(g);
    return text;
  };
  compute_mode_ = "checked: " + std::to_string(modes.gpus) + " GPUs";
  if (!modes.prohibited.empty()) {
    compute_mode_ += ", Prohibited on " + list(modes.prohibited);
    return fail(now, "MPS not started: GPU " + list(modes.prohibited) +
                         " is in compute mode Prohibited (no process may create a context)");
  }
  if (!modes.exclusive_process.empty()) {
    compute_mode_ += ", Exclusive_Process on " + list(modes.exclusive_process);
    // MPS works there (its server is the one context), but a job that is not a client cannot
    // create a context while the server holds the GPU: say so, once.
    spdlog::warn(
        "mps: GPU {} is in compute mode Exclusive_Process: MPS clients share it, but a job given "
        "no MPS (another user's, or while MPS is down) cannot create a context there",
        list(modes.exclusive_process));
  }
  start_control_daemon(now);
}

void MpsSupervisor::start_control_daemon(Clock::time_point now) {
  std::optional<std::string> program = find_on_path(kMpsControlProgram, std::getenv("PATH"));
  if (!program) {
    const char* path = std::getenv("PATH");
    return fail(now, std::string("MPS not started: ") + kMpsControlProgram +
                         " not found on PATH (" + (path ? path : "unset") + ")");
  }
  if (auto found = find_control_daemon(pipe_, {})) return adopt(*found, now, "using the");
  std::string error;
  helper_ = spawn_program({*program, "-d"}, mps_env(), std::nullopt,
                          log_ + "/gpushared-control-start.txt", &error);
  if (helper_.pid < 0) return fail(now, "MPS not started: cannot run " + *program + ": " + error);
  state_ = State::starting;
  deadline_ = now + kHelperTimeout;
}

void MpsSupervisor::adopt(const RunningControlDaemon& found, Clock::time_point now,
                          const char* how) {
  daemon_pid_ = found.pid;
  daemon_uid_ = found.uid;
  state_ = State::running;
  error_.clear();
  last_logged_error_.clear();
  running_since_ = now;
  next_check_ = now + kLivenessPeriod;
  spdlog::info(
      "mps auto: {} MPS control daemon pid {} (uid {}), pipe directory {}, logs in {}{}", how,
      found.pid, found.uid, pipe_, log_,
      found.uid != 0 ? "; it serves only uid " + std::to_string(found.uid) : std::string());
}

void MpsSupervisor::fail(Clock::time_point now, const std::string& why) {
  state_ = State::failed;
  error_ = why;
  retry_at_ = now + backoff_;
  // One line per distinct failure: a permanent one is retried quietly.
  if (why != last_logged_error_)
    spdlog::error("{}; jobs run time-sliced (no MPS), retrying in {} s", why, backoff_.count());
  else
    spdlog::debug("{} (again); retrying in {} s", why, backoff_.count());
  last_logged_error_ = why;
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
}

void MpsSupervisor::kill_helper() {
  if (helper_.pid <= 0) return;
  ::kill(helper_.pid, SIGKILL);
  // SIGKILL cannot be caught: the child is gone almost at once, reaped here or at exit.
  reap(helper_.pid);
  helper_ = {};
}

void MpsSupervisor::tick(Clock::time_point now) {
  switch (state_) {
    case State::off:
    case State::external:
    case State::stopped:
      return;
    case State::checking_compute_mode: {
      std::optional<int> status = reap(helper_.pid);
      if (status) return compute_mode_checked(now, status);
      if (now >= deadline_) {
        kill_helper();
        helper_.output_path = log_ + "/gpushared-compute-mode.txt";
        return compute_mode_checked(now, std::nullopt);
      }
      return;
    }
    case State::starting: {
      std::optional<int> status = reap(helper_.pid);
      if (!status && now < deadline_) return;
      std::string output = read_text_file(helper_.output_path);
      if (!status) {
        kill_helper();
        return fail(now, "MPS not started: nvidia-cuda-mps-control -d did not return within " +
                             std::to_string(kHelperTimeout.count()) + " s");
      }
      helper_ = {};
      if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        std::string line = last_line(output);
        return fail(now, "MPS not started: nvidia-cuda-mps-control -d failed (" +
                             describe_wait_status(*status) +
                             (line.empty() ? std::string(")") : "): " + line));
      }
      state_ = State::confirming;
      deadline_ = now + kConfirmTimeout;
      [[fallthrough]];
    }
    case State::confirming:
      if (auto found = find_control_daemon(pipe_, {})) return adopt(*found, now, "started the");
      if (now >= deadline_)
        fail(now,
             "MPS not started: nvidia-cuda-mps-control -d returned 0 but no control daemon "
             "serves " +
                 pipe_);
      return;
    case State::running:
      if (now < next_check_) return;
      next_check_ = now + kLivenessPeriod;
      if (now - running_since_ >= kStableAfter) backoff_ = std::chrono::seconds(1);
      if (process_alive(daemon_pid_)) return;
      spdlog::warn(
          "mps: the MPS control daemon pid {} has exited; restarting it in {} s (jobs starting "
          "meanwhile run time-sliced)",
          daemon_pid_, backoff_.count());
      daemon_pid_ = -1;
      state_ = State::waiting_to_restart;
      retry_at_ = now + backoff_;
      backoff_ = std::min(backoff_ * 2, kMaxBackoff);
      return;
    case State::waiting_to_restart:
    case State::failed:
      if (now >= retry_at_) start_control_daemon(now);
      return;
    case State::stopping: {
      if (helper_.pid > 0 && reap(helper_.pid)) helper_.pid = -1;
      if (helper_.pid <= 0 && !process_alive(daemon_pid_)) {
        spdlog::info("mps: the MPS control daemon pid {} has quit", daemon_pid_);
        state_ = State::stopped;
        return;
      }
      if (now < deadline_) return;
      kill_helper();
      if (process_alive(daemon_pid_)) ::kill(daemon_pid_, SIGKILL);
      spdlog::warn(
          "mps: the MPS control daemon pid {} did not quit within {} s (quit waits for its "
          "clients to exit): killed it",
          daemon_pid_, kQuitTimeout.count());
      state_ = State::stopped;
      return;
    }
  }
}

void MpsSupervisor::reload(const MpsConfig& next) {
  if (next.mode != config_.mode || next.pipe_directory != config_.pipe_directory)
    spdlog::warn("mps: \"mps\" changed to {}{}: takes effect after a restart",
                 mps_mode_name(next.mode),
                 next.pipe_directory ? " at " + *next.pipe_directory : std::string());
  config_.thread_percentage = next.thread_percentage;
}

bool MpsSupervisor::begin_stop(Clock::time_point now) {
  if (config_.mode != MpsMode::automatic || state_ == State::stopped) return false;
  kill_helper();  // a compute-mode check or a `-d` in flight
  // Ours, or one a `-d` just started: whatever serves our pipe directory ends with us.
  std::optional<RunningControlDaemon> found = find_control_daemon(pipe_, {});
  state_ = State::stopped;
  if (!found) return false;
  daemon_pid_ = found->pid;
  std::optional<std::string> program = find_on_path(kMpsControlProgram, std::getenv("PATH"));
  std::string error;
  if (program)
    helper_ = spawn_program({*program}, mps_env(), std::string("quit\n"),
                            log_ + "/gpushared-control-quit.txt", &error);
  if (helper_.pid < 0)
    spdlog::warn("mps: cannot run {} quit: {}", kMpsControlProgram,
                 program ? error : "not on PATH");
  state_ = State::stopping;
  deadline_ = now + kQuitTimeout;
  spdlog::info("mps: asking the MPS control daemon pid {} to quit (at most {} s)", daemon_pid_,
               kQuitTimeout.count());
  return true;
}

MpsService MpsSupervisor::service() const {
  MpsService s;
  s.pipe_directory = pipe_;
  switch (state_) {
    case State::off:
      s.unavailable = "MPS is off in gpushared's configuration";
      return s;
    case State::external: {
      // MPS's control daemon keeps its "control" pipe there while it runs; its owner is the user
      // the daemon runs as.
      struct stat st;
      std::string control = pipe_ + "/control";
      if (stat(control.c_str(), &st) != 0) {
        s.unavailable = "no MPS control daemon at " + pipe_ + " (" + control + ": " +
                        std::strerror(errno) + ")";
        return s;
      }
      s.available = true;
      s.owner_uid = st.st_uid;
      return s;
    }
    case State::running:
      s.available = true;
      s.owner_uid = daemon_uid_;
      return s;
    case State::checking_compute_mode:
    case State::starting:
    case State::confirming:
      // A retry after a failure still reports the failure until a start succeeds.
      s.unavailable = error_.empty() ? "gpushared's MPS control daemon is starting" : error_;
      return s;
    case State::waiting_to_restart:
      s.unavailable = "gpushared's MPS control daemon is restarting";
      return s;
    case State::failed:
      s.unavailable = error_;
      return s;
    case State::stopping:
    case State::stopped:
      s.unavailable = "gpushared is stopping";
      return s;
  }
  return s;
}

nlohmann::json MpsSupervisor::status() const {
  bool retrying = !error_.empty() && (state_ == State::checking_compute_mode ||
                                      state_ == State::starting || state_ == State::confirming);
  nlohmann::json j = {{"mode", mps_mode_name(config_.mode)},
                      {"state", retrying ? "failed" : state_name(state_)}};
  if (config_.mode == MpsMode::off) return j;
  MpsService s = service();
  j["pipe_directory"] = pipe_;
  j["available"] = s.available;
  j["owner_uid"] = s.available ? nlohmann::json(s.owner_uid) : nlohmann::json(nullptr);
  j["error"] = s.available ? nlohmann::json(nullptr) : nlohmann::json(s.unavailable);
  if (config_.thread_percentage) j["thread_percentage"] = *config_.thread_percentage;
  if (config_.mode == MpsMode::automatic) {
    j["log_directory"] = log_;
    j["pid"] = daemon_pid_ > 0 && state_ == State::running ? nlohmann::json(daemon_pid_)
                                                           : nlohmann::json(nullptr);
    j["compute_mode"] = compute_mode_;
    if (state_ == State::failed || state_ == State::waiting_to_restart)
      j["retry_in_s"] = std::max(0L, seconds_until(retry_at_, Clock::now()));
  }
  return j;
}

}  // namespace gpushare::daemon
