#include "subprocess.h"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace gpushare::testing {
namespace {

bool inherited(const char* entry) {
  return std::strncmp(entry, "LD_PRELOAD=", 11) != 0 &&
         std::strncmp(entry, "LD_LIBRARY_PATH=", 16) != 0 &&
         std::strncmp(entry, "GPUSHARE_", 9) != 0;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[65536];
  lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

void remove_tree(const std::string& path) {
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      std::string child = path + "/" + name;
      struct stat st {};
      if (lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(child);
      } else {
        unlink(child.c_str());
      }
    }
    closedir(d);
  }
  rmdir(path.c_str());
}
}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const Env& env) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    if (inherited(*e)) environment.emplace_back(*e);
  }
  for (const auto& [key, value] : env) environment.push_back(key + "=" + value);
  std::vector<char*> envp, args;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  out_fd_ = memfd_create("stdout", MFD_CLOEXEC);
  err_fd_ = memfd_create("stderr", MFD_CLOEXEC);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd_, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd_, STDERR_FILENO);
  int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !waited_) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

ProcessResult Subprocess::collect(int status) {
  waited_ = true;
  ProcessResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_all(out_fd_);
  r.err = read_all(err_fd_);
  return r;
}

ProcessResult Subprocess::wait(double timeout_s) {
  const timespec pause{0, 2'000'000};
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return collect(status);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (static_cast<double>(now.tv_sec - start.tv_sec) +
            static_cast<double>(now.tv_nsec - start.tv_nsec) * 1e-9 >
        timeout_s) {
      break;
    }
    nanosleep(&pause, nullptr);
  }
  ProcessResult r = kill_and_wait(SIGKILL);
  r.timed_out = true;
  return r;
}

ProcessResult Subprocess::kill_and_wait(int signal) {
  ::kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  return collect(status);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gpushare-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  remove_tree(path_);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool file_exists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

int count_lines_containing(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}
}  // namespace gpushare::testing
