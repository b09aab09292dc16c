// The operating-system side of running MPS programs (docs/mps.md): finding them on PATH,
// starting them without waiting (posix_spawn, output to files), finding a running control daemon
// in /proc, and reading what the programs printed. The parsers are pure and unit-tested.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpushare::daemon {

inline constexpr const char* kMpsControlProgram = "nvidia-cuda-mps-control";

// The absolute path of `program` in the colon-separated `path`, when it is there and executable.
std::optional<std::string> find_on_path(const std::string& program, const char* path);

// Where `auto` keeps MPS's pipes and logs: systemd's RUNTIME_DIRECTORY (its first entry) when
// set, else the folder of the daemon's socket.
std::string mps_runtime_directory(const std::string& socket_path, const char* runtime_directory);

// A started program, not yet reaped.
struct SpawnedProgram {
  pid_t pid = -1;
  std::string output_path;  // its stdout and stderr
};

// Starts `argv` with the daemon's environment plus `extra_env` (replacing same-named variables),
// stdin from /dev/null or, when `stdin_text` is given, a pipe holding that text, and stdout and
// stderr appended to `output_path` (truncated first). Signals the daemon blocks or ignores are
// back to normal in the child. pid -1 and *error on failure.
SpawnedProgram spawn_program(const std::vector<std::string>& argv,
                             const std::map<std::string, std::string>& extra_env,
                             const std::optional<std::string>& stdin_text,
                             const std::string& output_path, std::string* error);

// waitpid(WNOHANG): the raw wait status when `pid` has exited, else nothing.
std::optional<int> reap(pid_t pid);
// "rc 1", "killed by signal 9".
std::string describe_wait_status(int status);

// The last non-empty line of `text`, at most 200 bytes ("" when none).
std::string last_line(std::string_view text);
std::string read_text_file(const std::string& path);

// Is the process with this /proc/<pid>/cmdline and /proc/<pid>/environ (NUL-separated) an MPS
// control daemon serving `pipe_directory`? Its program is nvidia-cuda-mps-control and its
// CUDA_MPS_PIPE_DIRECTORY is that folder (unset means MPS's default /tmp/nvidia-mps).
bool is_control_daemon(std::string_view cmdline, std::string_view environ,
                       std::string_view pipe_directory);

struct RunningControlDaemon {
  pid_t pid = -1;
  uid_t uid = 0;
};
// Scans /proc for a control daemon serving `pipe_directory`, skipping `ignore` (the daemon's own
// short-lived nvidia-cuda-mps-control children). Processes whose environment it may not read
// (other users', when not root) are not found.
std::optional<RunningControlDaemon> find_control_daemon(const std::string& pipe_directory,
                                                        const std::set<pid_t>& ignore);

// `nvidia-smi --query-gpu=compute_mode --format=csv,noheader` prints one mode per GPU. What
// matters to MPS: a Prohibited GPU takes no context at all (MPS cannot start its server there);
// on an Exclusive_Process GPU the MPS server is the only context, so every job that is not an MPS
// client (another user's, or any job while MPS is down) fails to create one.
struct ComputeModes {
  std::vector<int> prohibited;         // GPU indices, in nvidia-smi's order
  std::vector<int> exclusive_process;  // GPU indices
  int gpus = 0;
};
ComputeModes parse_compute_modes(std::string_view text);

}  // namespace gpushare::daemon
