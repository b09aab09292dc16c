// Shared by the memory tests: a daemon with a small configured capacity on a fake device of the
// same size, and memory_client processes with the shim preloaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "harness.h"

namespace gpushare::testing {

// Small, so that filling and checksumming 0.8 C costs little on a busy CI machine.
inline constexpr uint64_t kCapacity = 64ull << 20;

// The daemon's config: capacity C, production for jobs named "prod*", limits merged in.
nlohmann::json memory_config(nlohmann::json limits = nlohmann::json::object());

// A memory_client through "init", on the test's fake device of kCapacity bytes.
ChildProcess start_client(const TempDir& dir, const std::string& socket, const std::string& job,
                          const std::string& priority,
                          std::map<std::string, std::string> extra_env = {});

// "ok <value>" -> value; nullopt for anything else.
std::optional<uint64_t> ok_number(const std::string& answer);
// "ok <a> <b> ..." -> the n-th number (0-based).
std::optional<uint64_t> ok_field(const std::string& answer, int n);

// The job's memory_state in `gpusharectl jobs -o json`.
nlohmann::json memory_state(const std::string& socket, pid_t pid);

}  // namespace gpushare::testing
