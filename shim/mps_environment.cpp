#include "mps_environment.h"

#include <cstdlib>

namespace gpushare::shim {
namespace {

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The whole text is a number, else nothing.
std::optional<double> number(const char* text) {
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (*end != '\0') return std::nullopt;
  return value;
}

}  // namespace

MpsEnvironment decide_mps_environment(const std::optional<MpsGrant>& grant,
                                      const EnvLookup& current) {
  MpsEnvironment out;
  if (!grant) return out;  // no daemon, or no MPS for this job: the environment stays as it is

  const char* pipe = current("CUDA_MPS_PIPE_DIRECTORY");
  if (!pipe || !*pipe) {
    out.set.emplace_back("CUDA_MPS_PIPE_DIRECTORY", grant->pipe_directory);
  } else if (without_trailing_slashes(pipe) != without_trailing_slashes(grant->pipe_directory)) {
    out.set.emplace_back("CUDA_MPS_PIPE_DIRECTORY", grant->pipe_directory);
    out.warnings.push_back(std::string("CUDA_MPS_PIPE_DIRECTORY=") + pipe +
                           " is not gpushared's MPS: replaced by " + grant->pipe_directory +
                           " (set mps to off in gpushared's configuration to run your own MPS)");
  }

  const std::string granted_priority = std::to_string(grant->client_priority);
  const char* priority = current("CUDA_MPS_CLIENT_PRIORITY");
  std::optional<double> asked = number(priority);
  bool valid = asked && (*asked == 0 || *asked == 1);
  if (!priority || !*priority) {
    out.set.emplace_back("CUDA_MPS_CLIENT_PRIORITY", granted_priority);
  } else if (!valid || *asked < grant->client_priority) {  // 0 is the higher priority
    out.set.emplace_back("CUDA_MPS_CLIENT_PRIORITY", granted_priority);
    out.warnings.push_back(std::string("CUDA_MPS_CLIENT_PRIORITY=") + priority +
                           (valid ? " is above what gpushared grants this job" : " is not 0 or 1") +
                           ": replaced by " + granted_priority);
  }

  if (grant->thread_percentage > 0) {
    const std::string limit = std::to_string(grant->thread_percentage);
    const char* threads = current("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    std::optional<double> wanted = number(threads);
    if (!threads || !*threads) {
      out.set.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", limit);
    } else if (!wanted || *wanted <= 0 || *wanted > grant->thread_percentage) {
      out.set.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", limit);
      out.warnings.push_back(std::string("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=") + threads +
                             " is not in (0, " + limit +
                             "], gpushared's limit for this job: " + "replaced by " + limit);
    }
  }
  return out;
}

}  // namespace gpushare::shim
