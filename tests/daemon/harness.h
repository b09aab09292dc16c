// What the daemon tests drive: a real gpushared (own temp socket and config), the real
// gpusharectl, shim-hosting probe processes on the fake driver, and raw protocol clients.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpushare/protocol/wire.h"

namespace gpushare::testing {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Polls `condition` every `step` until it holds or `timeout` passes. Returns whether it held.
bool eventually(const std::function<bool()>& condition, Millis timeout, Millis step = 10ms);
double seconds_since(std::chrono::steady_clock::time_point t);
std::string read_file(const std::string& path);

// A temporary folder (mode 1777, so a test may act as another user), removed with its contents.
struct TempDir {
  TempDir();
  ~TempDir();
  std::string path;
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// A child process with a pipe to its stdin and one from its stdout (stderr goes to a file).
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ~ChildProcess();  // SIGKILLs and reaps a child still running

  // `env` replaces the environment; `as_uid` (when set) runs the child as that uid/gid.
  static ChildProcess start(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env,
                            const std::string& stderr_path, std::optional<uid_t> as_uid = {});
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  bool send_line(const std::string& line);
  std::optional<std::string> read_line(Millis timeout);
  // Sends a command and returns its one-line answer ("" on timeout).
  std::string ask(const std::string& line, Millis timeout = 10s);
  void signal(int signo);
  // Waits for the child to exit; returns the raw wait status, or -1 on timeout.
  int wait(Millis timeout = 10s);

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffered_;
};

// A gpushared under test.
class Daemon {
 public:
  // `config` is written to <dir>/gpushared.json after socket.path is set to <dir>/gpushared.sock.
  explicit Daemon(const TempDir& dir, nlohmann::json config = nlohmann::json::object());
  ~Daemon();
  bool start();  // starts and waits until `gpusharectl status` answers
  void kill(int signo);
  int wait(Millis timeout = 10s);
  void write_config(const nlohmann::json& config);
  std::string log() const;
  bool log_contains(const std::string& text) const;
  bool wait_for_log(const std::string& text, Millis timeout = 5s) const;
  pid_t pid() const { return process_.pid(); }

  std::string socket;
  std::string config_path;
  std::string log_path;
  std::vector<std::string> extra_args;  // after --config, e.g. {"--proc-root", dir}
  std::map<std::string, std::string> extra_env;  // beside PATH, e.g. LD_LIBRARY_PATH for NVML

 private:
  ChildProcess process_;
};

struct CtlResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json json;  // parsed stdout when it is JSON
};
// Runs the real gpusharectl with `args` and --socket, optionally as another user (uid = gid).
CtlResult run_ctl(const std::string& socket, const std::vector<std::string>& args,
                  std::optional<uid_t> as_uid = {});
// `gpusharectl jobs -o json`'s job list ([] when the daemon does not answer).
nlohmann::json list_jobs(const std::string& socket);
std::optional<nlohmann::json> job_with_pid(const std::string& socket, pid_t pid);

// A probe (tests/daemon/daemon_probe.cpp) with the shim preloaded on the fake driver, already
// through "init". Returns a process that is not running when it could not start.
struct ProbeOptions {
  std::string job = "probe";
  std::string priority = "opportunistic";
  std::optional<uid_t> as_uid;
  std::map<std::string, std::string> extra_env;
};
inline ProbeOptions probe_as(std::string job, std::string priority = "opportunistic",
                             std::optional<uid_t> as_uid = {}) {
  return ProbeOptions{std::move(job), std::move(priority), as_uid, {}};
}
ChildProcess start_probe(const TempDir& dir, const std::string& socket,
                         const ProbeOptions& options);

// Speaks the wire protocol directly, to send what a real shim never would.
class RawClient {
 public:
  ~RawClient();
  bool connect(const std::string& socket);
  bool send_bytes(const void* data, size_t length);
  bool send_frame(protocol::MessageType type, const void* payload, size_t length,
                  uint16_t version = protocol::kWireVersion);
  // Registers; *memfd receives the control block's descriptor.
  std::optional<protocol::RegisterReply> register_job(const std::string& name,
                                                      protocol::JobClass requested,
                                                      uint32_t client_pid, int* memfd);
  // Receives one frame (header + payload) or nothing within the timeout.
  std::optional<std::vector<uint8_t>> receive(Millis timeout);
  // True when the daemon closes this connection within `timeout`.
  bool closed_by_daemon(Millis timeout);
  int fd = -1;
};

// Paths of the built artefacts (set by tests/daemon/CMakeLists.txt).
struct Artefacts {
  static const char* daemon();
  static const char* ctl();
  static const char* shim();
  static const char* fake_driver_dir();
  static const char* probe();
  static const char* workload();  // tests/clients/client_workload
  static const char* deploy_dir();
};

}  // namespace gpushare::testing
