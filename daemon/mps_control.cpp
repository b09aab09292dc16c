#include "mps_control.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace gpushare::daemon {
namespace {

std::string read_proc_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::optional<std::string> find_on_path(const std::string& program, const char* path) {
  if (!path) return std::nullopt;
  std::string_view rest = path;
  while (true) {
    size_t colon = rest.find(':');
    std::string folder(rest.substr(0, colon));
    if (!folder.empty()) {
      std::string candidate = folder + "/" + program;
      struct stat st;
      if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(colon + 1);
  }
}

std::string mps_runtime_directory(const std::string& socket_path, const char* runtime_directory) {
  if (runtime_directory && runtime_directory[0] == '/') {
    std::string_view all = runtime_directory;
    return std::string(all.substr(0, all.find(':')));
  }
  size_t slash = socket_path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return socket_path.substr(0, slash);
}

SpawnedProgram spawn_program(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& extra_env,
                             const std::optional<std::string>& stdin_text,
                             const std::string& output_path, std::string* error) {
  SpawnedProgram spawned;
  spawned.output_path = output_path;
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry = *e;
    if (!extra_env.count(std::string(entry.substr(0, entry.find('=')))))
      env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : extra_env) env_strings.push_back(name + "=" + value);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int input[2] = {-1, -1};
  if (stdin_text) {
    // The text is a command or two: it fits the pipe's buffer, so writing it never blocks.
    if (pipe2(input, O_CLOEXEC) != 0) return *error = std::strerror(errno), spawned;
    ssize_t written = ::write(input[1], stdin_text->data(), stdin_text->size());
    (void)written;
    ::close(input[1]);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_text)
    posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);
  else
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The daemon blocks SIGHUP/SIGTERM/SIGINT (signalfd) and ignores SIGPIPE; a child inherits both.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGHUP, SIGTERM, SIGINT, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawn(&spawned.pid, args[0], &actions, &attributes, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (input[0] >= 0) ::close(input[0]);
  if (rc != 0) {
    *error = std::strerror(rc);
    spawned.pid = -1;
  }
  return spawned;
}

std::optional<int> reap(pid_t pid) {
  int status = 0;
  pid_t done;
  do {
    done = waitpid(pid, &status, WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == pid) return status;
  if (done < 0) return 0;  // not our child any more (ECHILD): count it as gone
  return std::nullopt;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "rc " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string last_line(std::string_view text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return "";
  text = text.substr(0, end + 1);
  size_t start = text.rfind('\n');
  std::string line(start == std::string_view::npos ? text : text.substr(start + 1));
  line = line.substr(0, 200);
  for (char& ch : line)
    if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  return line;
}

std::string read_text_file(const std::string& path) {
  return read_proc_file(path);
}

bool is_control_daemon(std::string_view cmdline, std::string_view environ_text,
                       std::string_view pipe_directory) {
  std::string_view program = cmdline.substr(0, cmdline.find('\0'));
  if (basename_of(program) != kMpsControlProgram) return false;
  constexpr std::string_view kName = "CUDA_MPS_PIPE_DIRECTORY=";
  std::string_view served = "/tmp/nvidia-mps";  // MPS's default
  while (!environ_text.empty()) {
    size_t end = environ_text.find('\0');
    std::string_view entry = environ_text.substr(0, end);
    if (entry.substr(0, kName.size()) == kName) served = entry.substr(kName.size());
    if (end == std::string_view::npos) break;
    environ_text.remove_prefix(end + 1);
  }
  while (served.size() > 1 && served.back() == '/') served.remove_suffix(1);
  return served == pipe_directory;
}

std::optional<RunningControlDaemon> find_control_daemon(const std::string& pipe_directory,
                                                        const std::set<pid_t>& ignore) {
  DIR* proc = opendir("/proc");
  if (!proc) return std::nullopt;
  std::optional<RunningControlDaemon> found;
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || ignore.count(static_cast<pid_t>(pid))) continue;
    std::string folder = std::string("/proc/") + entry->d_name;
    std::string cmdline = read_proc_file(folder + "/cmdline");
    if (cmdline.empty() ||
        basename_of(std::string_view(cmdline).substr(0, cmdline.find('\0'))) != kMpsControlProgram)
      continue;  // cheap test first: environ is read only for the MPS program
    if (!is_control_daemon(cmdline, read_proc_file(folder + "/environ"), pipe_directory)) continue;
    struct stat st;
    if (stat(folder.c_str(), &st) != 0) continue;
    found = RunningControlDaemon{static_cast<pid_t>(pid), st.st_uid};
    break;
  }
  closedir(proc);
  return found;
}

ComputeModes parse_compute_modes(std::string_view text) {
  ComputeModes modes;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!line.empty()) {
      int gpu = modes.gpus++;
      if (line == "Prohibited") modes.prohibited.push_back(gpu);
      if (line == "Exclusive_Process") modes.exclusive_process.push_back(gpu);
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return modes;
}

}  // namespace gpushare::daemon
