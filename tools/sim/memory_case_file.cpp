#include "memory_case_file.h"

#include <fstream>
#include <set>

#include "json_fields.h"

namespace gpushare::sim {
namespace {

constexpr double MiB = 1 << 20;

std::string load_job(const Fields::json& object, size_t index, MemoryJob& job) {
  Fields f(object, "job " + std::to_string(index));
  f.text("name", job.name);
  if (!f.real("compute_s", job.compute_s) || !(job.compute_s > 0))
    f.fail("compute_s", "is required and must be > 0");
  if (f.real("idle_s", job.idle_s) && !(job.idle_s >= 0)) f.fail("idle_s", "must be >= 0");
  f.number("working_set_mib", job.bytes, MiB);
  f.number("steps", job.steps);
  if (job.name.empty()) f.fail("name", "is required");
  if (job.bytes == 0) f.fail("working_set_mib", "is required and must be > 0");
  if (job.steps == 0) f.fail("steps", "must be > 0");
  job.arrival = index;
  return f.finish();
}

}  // namespace

std::string load_memory_case(const std::string& path, MemoryCase& memory_case) {
  std::ifstream file(path);
  if (!file) return path + ": cannot be read";
  const Fields::json document = Fields::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return path + ": not valid JSON";

  Fields f(document, path + ":");
  f.number("capacity_mib", memory_case.capacity_bytes, MiB);
  if (memory_case.capacity_bytes == 0) f.fail("capacity_mib", "is required and must be > 0");
  f.number("production_mib", memory_case.production_bytes, MiB);
  double rate = 0;
  if (!f.real("host_to_device_mib_per_s", rate) || !(rate > 0))
    f.fail("host_to_device_mib_per_s", "is required and must be > 0");
  memory_case.host_to_device_bytes_per_s = memory_case.device_to_host_bytes_per_s = rate * MiB;
  if (f.real("device_to_host_mib_per_s", rate)) {
    if (!(rate > 0)) f.fail("device_to_host_mib_per_s", "must be > 0");
    memory_case.device_to_host_bytes_per_s = rate * MiB;
  }
  f.flag("writeback", memory_case.writeback);
  const Fields::json* jobs = f.list("jobs");
  if (!jobs || jobs->empty()) f.fail("jobs", "must list at least one job");
  std::string error = f.finish();
  if (!error.empty()) return error;

  std::set<std::string> names;
  for (size_t i = 0; i < jobs->size(); ++i) {
    MemoryJob job;
    error = load_job((*jobs)[i], i, job);
    if (!error.empty()) return path + ": " + error;
    if (!names.insert(job.name).second) return path + ": two jobs are named '" + job.name + "'";
    memory_case.jobs.push_back(job);
  }
  error = check_case(memory_case);
  return error.empty() ? error : path + ": " + error;
}

}  // namespace gpushare::sim
