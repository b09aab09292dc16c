// The ctl request (docs/protocol.md, "Control requests"): one JSON object per frame,
// {"command": <command>, <fields>...}, answered by one JSON object. The names are written once
// here, for gpusharectl, which builds requests, and gpushared, which reads them.
#pragma once

namespace gpushare::protocol::ctl {

inline constexpr const char* kCommand = "command";

// Commands.
namespace command {
inline constexpr const char* kStatus = "status";
inline constexpr const char* kJobs = "jobs";
inline constexpr const char* kSetPriority = "set-priority";
inline constexpr const char* kPolicy = "policy";
inline constexpr const char* kReload = "reload";
inline constexpr const char* kSetLimit = "set-limit";
inline constexpr const char* kMps = "mps";
}  // namespace command

// Request fields.
namespace field {
inline constexpr const char* kPid = "pid";          // set-priority, set-limit: the target process
inline constexpr const char* kJob = "job";          // set-priority, set-limit: the target job name
inline constexpr const char* kAll = "all";          // a job name that several users' jobs carry
inline constexpr const char* kClass = "class";      // set-priority: production | opportunistic
inline constexpr const char* kDevice = "device";    // policy: the physical device
inline constexpr const char* kPolicy = "policy";    // policy: its name
inline constexpr const char* kParameters = "parameters";  // policy: "k=v,k=v"
inline constexpr const char* kBytes = "bytes";      // set-limit: a number, null or "unlimited"
inline constexpr const char* kUnlimited = "unlimited";
}  // namespace field

}  // namespace gpushare::protocol::ctl
