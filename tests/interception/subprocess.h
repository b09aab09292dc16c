// Runs a program as a child process with a controlled environment and captures its output.
// Used by the interception and fake-driver suites to run the test clients with and without the
// shim preloaded.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace gpushare::testing {

// Variables set for the child on top of the test's own environment, from which LD_PRELOAD,
// LD_LIBRARY_PATH and every GPUSHARE_* variable are removed first.
using Env = std::map<std::string, std::string>;

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // the signal that ended it, 0 when it exited
  bool timed_out = false;
  std::string out, err;  // everything it wrote to stdout and stderr
};

class Subprocess {
 public:
  // Starts argv[0] (a path) with argv; stdout and stderr go to anonymous files read by wait().
  Subprocess(const std::vector<std::string>& argv, const Env& env);
  ~Subprocess();  // kills the child if it was never waited for
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Waits at most timeout_s seconds, then kills it (timed_out = true).
  ProcessResult wait(double timeout_s = 30);
  // Sends a signal and reaps the child (so that its pid is gone, not a zombie).
  ProcessResult kill_and_wait(int signal);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool waited_ = false;
  ProcessResult collect(int status);
};

inline ProcessResult run_process(const std::vector<std::string>& argv, const Env& env,
                                 double timeout_s = 30) {
  return Subprocess(argv, env).wait(timeout_s);
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);
// Lines of `text` that contain `needle`.
int count_lines_containing(const std::string& text, const std::string& needle);
}  // namespace gpushare::testing
