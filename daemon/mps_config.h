// The MPS keys of gpushared's configuration (docs/mps.md): whether jobs run as clients of an MPS
// control daemon, whose, and how much of the GPU an opportunistic client may use.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpushare::daemon {

enum class MpsMode {
  off,        // no MPS: jobs are time-sliced by the driver (the default)
  automatic,  // "auto": gpushared starts, supervises and stops its own MPS control daemon
  external,   // an MPS control daemon someone else runs, at mps_pipe_directory
};

// MPS's own default pipe directory, used by `external` without mps_pipe_directory.
inline constexpr const char* kMpsDefaultPipeDirectory = "/tmp/nvidia-mps";
// MPS creates Unix sockets inside the pipe directory (108-byte sun_path): leave room for names.
inline constexpr size_t kMpsPipeDirectoryMax = 80;

struct MpsConfig {
  // Off by default: MPS changes the failure model of every job on the GPU (a fatal fault in one
  // client reaches all of them) and serves one user at a time; an operator opts in (docs/mps.md).
  MpsMode mode = MpsMode::off;
  std::optional<int> thread_percentage;       // opportunistic clients only, 1..100; none: no limit
  std::optional<std::string> pipe_directory;  // `external` only
};

const char* mps_mode_name(MpsMode mode);  // "off", "auto", "external"

// Parses the top-level keys "mps", "mps_thread_percentage", "mps_pipe_directory" of `document`
// (an object) into `out`; each problem is appended to `errors` as "<key>: what was expected".
void parse_mps_config(const nlohmann::json& document, MpsConfig* out,
                      std::vector<std::string>* errors);

}  // namespace gpushare::daemon
