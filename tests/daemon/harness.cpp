#include "harness.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpushare/protocol/framing.h"
#include "shim_preload.h"

namespace gpushare::testing {

const char* Artefacts::daemon() {
  return GPUSHARED_PATH;
}
const char* Artefacts::ctl() {
  return GPUSHARECTL_PATH;
}
const char* Artefacts::shim() {
  return SHIM_PATH;
}
const char* Artefacts::fake_driver_dir() {
  return FAKE_DRIVER_DIR;
}
const char* Artefacts::probe() {
  return PROBE_PATH;
}
const char* Artefacts::workload() {
  return CLIENT_WORKLOAD_PATH;
}
const char* Artefacts::deploy_dir() {
  return DEPLOY_DIR;
}

bool eventually(const std::function<bool()>& condition, Millis timeout, Millis step) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TempDir::TempDir() {
  char pattern[] = "/tmp/gpushare-daemon-test-XXXXXX";
  path = mkdtemp(pattern);
  chmod(path.c_str(), 01777);  // a test may run a probe as another user, which writes here
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

// --- ChildProcess ----------------------------------------------------------------------------

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      to_child_(std::exchange(other.to_child_, -1)),
      from_child_(std::exchange(other.from_child_, -1)),
      buffered_(std::move(other.buffered_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    new (this) ChildProcess(std::move(other));
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
}

ChildProcess ChildProcess::start(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& env,
                                 const std::string& stderr_path, std::optional<uid_t> as_uid) {
  int in[2], out[2];
  ChildProcess c;
  if (pipe2(in, O_CLOEXEC) != 0) return c;
  if (pipe2(out, O_CLOEXEC) != 0) return c;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  // A sanitized build's options (scripts/test-sanitizers.sh: no leak checks) reach the children
  // whose environment a test replaces: with LeakSanitizer on, a preloaded child's exit reports
  // the shim's process-long globals and fails with 1 before its buffered output is written.
  for (const char* name : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"})
    if (const char* value = std::getenv(name); value && !env.count(name))
      env_strings.push_back(std::string(name) + "=" + value);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (err >= 0) dup2(err, STDERR_FILENO);
    if (as_uid) {
      gid_t gid = static_cast<gid_t>(*as_uid);
      if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
          setresuid(*as_uid, *as_uid, *as_uid) != 0)
        _exit(126);
    }
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  c.pid_ = pid;
  c.to_child_ = in[1];
  c.from_child_ = out[0];
  return c;
}

bool ChildProcess::send_line(const std::string& line) {
  std::string text = line + "\n";
  return ::write(to_child_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

std::optional<std::string> ChildProcess::read_line(Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (size_t nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{from_child_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffered_.append(chunk, static_cast<size_t>(n));
  }
}

std::string ChildProcess::ask(const std::string& line, Millis timeout) {
  if (!send_line(line)) return "";
  return read_line(timeout).value_or("");
}

void ChildProcess::signal(int signo) {
  if (pid_ > 0) ::kill(pid_, signo);
}

int ChildProcess::wait(Millis timeout) {
  if (pid_ <= 0) return -1;
  int status = 0;
  bool done = eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout, 5ms);
  if (!done) return -1;
  pid_ = -1;
  return status;
}

// --- Daemon ----------------------------------------------------------------------------------

Daemon::Daemon(const TempDir& dir, nlohmann::json config)
    : socket(dir / "gpushared.sock"),
      config_path(dir / "gpushared.json"),
      log_path(dir / "gpushared.log") {
  write_config(config);
}

Daemon::~Daemon() {
  if (process_.running()) {
    process_.signal(SIGTERM);
    if (process_.wait(5s) == -1) process_.signal(SIGKILL);
  }
}

void Daemon::write_config(const nlohmann::json& config) {
  nlohmann::json c = config;
  if (!c.contains("socket")) c["socket"] = nlohmann::json::object();
  c["socket"]["path"] = socket;
  if (!c["socket"].contains("mode")) c["socket"]["mode"] = "0666";
  std::ofstream(config_path) << c.dump(2) << "\n";
}

bool Daemon::start() {
  std::vector<std::string> argv = {Artefacts::daemon(), "--config", config_path};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"}};
  env.insert(extra_env.begin(), extra_env.end());
  process_ = ChildProcess::start(argv, env, log_path);
  if (!process_.running()) return false;
  return eventually([&] { return run_ctl(socket, {"status"}).exit_code == 0; }, 10s, 20ms);
}

void Daemon::kill(int signo) {
  process_.signal(signo);
}
int Daemon::wait(Millis timeout) {
  return process_.wait(timeout);
}

std::string Daemon::log() const {
  return read_file(log_path);
}

bool Daemon::log_contains(const std::string& text) const {
  return log().find(text) != std::string::npos;
}

bool Daemon::wait_for_log(const std::string& text, Millis timeout) const {
  return eventually([&] { return log_contains(text); }, timeout);
}

// --- gpusharectl -----------------------------------------------------------------------------

CtlResult run_ctl(const std::string& socket, const std::vector<std::string>& args,
                  std::optional<uid_t> as_uid) {
  char err_path[] = "/tmp/gpusharectl-stderr-XXXXXX";
  int err_fd = mkstemp(err_path);
  ::close(err_fd);
  chmod(err_path, 0666);
  std::vector<std::string> argv = {Artefacts::ctl(), "--socket", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  CtlResult r;
  {
    ChildProcess ctl = ChildProcess::start(argv, {{"PATH", "/usr/bin:/bin"}}, err_path, as_uid);
    while (auto line = ctl.read_line(10s)) r.out += *line + "\n";
    int status = ctl.wait(10s);
    r.exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  r.err = read_file(err_path);
  ::unlink(err_path);
  r.json = nlohmann::json::parse(r.out, nullptr, false);
  return r;
}

nlohmann::json list_jobs(const std::string& socket) {
  CtlResult r = run_ctl(socket, {"jobs", "-o", "json"});
  if (r.exit_code != 0 || r.json.is_discarded() || !r.json.contains("jobs"))
    return nlohmann::json::array();
  return r.json["jobs"];
}

std::optional<nlohmann::json> job_with_pid(const std::string& socket, pid_t pid) {
  for (const auto& job : list_jobs(socket))
    if (job.value("pid", 0) == pid) return job;
  return std::nullopt;
}

// --- probe -----------------------------------------------------------------------------------

ChildProcess start_probe(const TempDir& dir, const std::string& socket,
                         const ProbeOptions& options) {
  std::string tag = options.as_uid ? "-" + std::to_string(*options.as_uid) : "";
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/bin:/bin"},
      {"LD_PRELOAD", shim_preload(Artefacts::shim())},
      {"LD_LIBRARY_PATH", Artefacts::fake_driver_dir()},
      {"GPUSHARE_SOCKET", socket},
      {"GPUSHARE_JOB", options.job},
      {"GPUSHARE_PRIORITY", options.priority},
      // The fake device of each user is its own file: a file created by root is not writable by
      // another test user.
      {"GPUSHARE_FAKE_DEVICE_FILE", dir / ("fake-device" + tag)},
  };
  for (const auto& [k, v] : options.extra_env) env[k] = v;
  ChildProcess probe = ChildProcess::start({Artefacts::probe()}, env,
                                           dir / ("probe" + tag + ".stderr"), options.as_uid);
  auto ready = probe.read_line(20s);
  if (!ready || ready->rfind("ready", 0) != 0 || probe.ask("init", 20s) != "ok")
    return ChildProcess();
  return probe;
}

// --- RawClient -------------------------------------------------------------------------------

RawClient::~RawClient() {
  if (fd >= 0) ::close(fd);
}

bool RawClient::connect(const std::string& socket) {
  fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  return fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

bool RawClient::send_bytes(const void* data, size_t length) {
  return ::send(fd, data, length, MSG_NOSIGNAL) == static_cast<ssize_t>(length);
}

bool RawClient::send_frame(protocol::MessageType type, const void* payload, size_t length,
                           uint16_t version) {
  protocol::FrameHeader h = protocol::make_header(type, static_cast<uint32_t>(length));
  h.version = version;
  return protocol::send_raw_frame(fd, h, payload, length) == protocol::SendResult::sent;
}

std::optional<protocol::RegisterReply> RawClient::register_job(const std::string& name,
                                                               protocol::JobClass requested,
                                                               uint32_t client_pid, int* memfd) {
  protocol::RegisterRequest r{};
  r.requested_class = static_cast<uint32_t>(requested);
  r.client_pid = client_pid;
  protocol::copy_text(r.job_name, name.c_str());
  if (!send_frame(protocol::MessageType::register_request, &r, sizeof r)) return std::nullopt;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return std::nullopt;
  uint8_t frame[sizeof(protocol::FrameHeader) + sizeof(protocol::RegisterReply)];
  protocol::Received received = protocol::receive_frame(fd, frame, sizeof frame);
  *memfd = received.take_first_fd();
  if (received.bytes != static_cast<ssize_t>(sizeof frame)) {
    if (*memfd >= 0) ::close(*memfd);
    *memfd = -1;
    return std::nullopt;
  }
  protocol::RegisterReply reply;
  std::memcpy(&reply, frame + sizeof(protocol::FrameHeader), sizeof reply);
  return reply;
}

std::optional<std::vector<uint8_t>> RawClient::receive(Millis timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return std::nullopt;
  std::vector<uint8_t> frame(sizeof(protocol::FrameHeader) + protocol::kMaxPayload);
  ssize_t n = recv(fd, frame.data(), frame.size(), 0);
  if (n <= 0) return std::nullopt;
  frame.resize(static_cast<size_t>(n));
  return frame;
}

bool RawClient::closed_by_daemon(Millis timeout) {
  return eventually(
      [&] {
        char byte[sizeof(protocol::FrameHeader) + sizeof(protocol::ErrorReply)];
        ssize_t n = recv(fd, byte, sizeof byte, MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN);
      },
      timeout, 5ms);
}

}  // namespace gpushare::testing
