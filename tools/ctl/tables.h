// Human-readable renderings of the daemon's JSON replies (gpusharectl without -o json).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpushare::ctl {

// With the "mps" object of the daemon's `mps` reply added to `reply` by gpusharectl.
std::string render_status(const nlohmann::json& reply);
// That "mps" object as the one line `status` prints (docs/mps.md).
std::string render_mps(const nlohmann::json& mps);
std::string render_jobs(const nlohmann::json& reply);
std::string render_set_priority(const nlohmann::json& reply);
std::string render_policy(const nlohmann::json& reply);
// `jobs --memory` and `set-limit` (docs/memory.md).
std::string render_jobs_memory(const nlohmann::json& reply);
std::string render_set_limit(const nlohmann::json& reply);

// 1536 -> "1.5 KiB"
std::string human_bytes(uint64_t bytes);

}  // namespace gpushare::ctl
