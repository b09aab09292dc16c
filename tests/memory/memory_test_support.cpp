#include "memory_test_support.h"

#include <sstream>

namespace gpushare::testing {

nlohmann::json memory_config(nlohmann::json limits) {
  nlohmann::json memory = {{"capacity", kCapacity}, {"oversubscribe", true}};
  if (!limits.empty()) memory["limits"] = limits;
  return {{"production", {{{"uid", 0}, {"job", "prod*"}}}}, {"memory", memory}};
}

ChildProcess start_client(const TempDir& dir, const std::string& socket, const std::string& job,
                          const std::string& priority, std::map<std::string, std::string> env) {
  ProbeOptions options = probe_as(job, priority);
  options.extra_env = std::move(env);
  options.extra_env["GPUSHARE_FAKE_MEMORY"] = std::to_string(kCapacity);
  // insert_or_assign, not operator[] = "1": GCC 12 warns (-Wrestrict) on that assignment, wrongly.
  options.extra_env.insert_or_assign("GPUSHARE_QUIET", std::string(1, '1'));
  return start_probe(dir, socket, options);
}

std::optional<uint64_t> ok_field(const std::string& answer, int n) {
  std::istringstream in(answer);
  std::string word;
  if (!(in >> word) || word != "ok") return std::nullopt;
  unsigned long long value = 0;
  for (int i = 0; i <= n; ++i)
    if (!(in >> value)) return std::nullopt;
  return value;
}

std::optional<uint64_t> ok_number(const std::string& answer) {
  return ok_field(answer, 0);
}

nlohmann::json memory_state(const std::string& socket, pid_t pid) {
  auto job = job_with_pid(socket, pid);
  return job ? job->value("memory_state", nlohmann::json::object()) : nlohmann::json::object();
}

}  // namespace gpushare::testing
