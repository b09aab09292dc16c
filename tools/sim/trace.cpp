#include "trace.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "json_fields.h"

namespace gpushare::sim {
namespace {

using nlohmann::json;

std::string load_job(const json& object, size_t index, JobSpec& job) {
  Fields f(object, "job " + std::to_string(index));
  f.text("name", job.name);
  std::string job_class = "opportunistic";
  f.text("class", job_class);
  if (job_class == "production")
    job.job_class = policies::JobClass::production;
  else if (job_class != "opportunistic")
    f.fail("class", "must be \"production\" or \"opportunistic\", not \"" + job_class + "\"");
  if (f.real("weight", job.weight) && !(job.weight > 0)) f.fail("weight", "must be > 0");
  f.number("kernel_us", job.kernel_ns, 1e3);
  if (f.real("kernel_spread", job.kernel_spread) &&
      !(job.kernel_spread >= 0 && job.kernel_spread < 1))
    f.fail("kernel_spread", "must be in [0, 1)");
  f.number("kernels_per_iteration", job.kernels_per_iteration);
  f.number("launch_us", job.launch_ns, 1e3);
  f.number("iteration_gap_ms", job.iteration_gap_ns, 1e6);
  f.number("queue_depth", job.queue_depth);
  f.number("start_s", job.start_ns, 1e9);
  f.number("stop_s", job.stop_ns, 1e9);
  f.number("on_s", job.on_ns, 1e9);
  f.number("off_s", job.off_ns, 1e9);
  if (job.name.empty()) f.fail("name", "is required");
  if (job.kernel_ns == 0) f.fail("kernel_us", "is required and must be > 0");
  if (job.kernels_per_iteration == 0) f.fail("kernels_per_iteration", "must be > 0");
  if (job.queue_depth == 0) f.fail("queue_depth", "must be > 0");
  if (job.on_ns > 0 && job.off_ns == 0) f.fail("off_s", "must be > 0 when on_s is set");
  if (job.stop_ns != 0 && job.stop_ns <= job.start_ns) f.fail("stop_s", "must be after start_s");
  return f.finish();
}

}  // namespace

bool JobSpec::scheduled_on(uint64_t t) const {
  if (t < start_ns || (stop_ns != 0 && t >= stop_ns)) return false;
  return on_ns == 0 || (t - start_ns) % (on_ns + off_ns) < on_ns;
}

uint64_t JobSpec::next_on(uint64_t t) const {
  if (t < start_ns) return start_ns;
  if (scheduled_on(t)) return t;
  if (stop_ns != 0 && t >= stop_ns) return UINT64_MAX;
  const uint64_t cycle = on_ns + off_ns;
  const uint64_t next = start_ns + ((t - start_ns) / cycle + 1) * cycle;
  return stop_ns != 0 && next >= stop_ns ? UINT64_MAX : next;
}

std::string load_trace(const std::string& path, Trace& trace) {
  std::ifstream file(path);
  if (!file) return path + ": cannot be read";
  const json document = json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return path + ": not valid JSON";

  Fields f(document, path + ":");
  double duration_s = 0;
  if (!f.real("duration_s", duration_s) || !(duration_s > 0 && duration_s <= 3600))
    f.fail("duration_s", "is required, in (0, 3600]");
  trace.duration_ns = static_cast<uint64_t>(duration_s * 1e9);
  f.number("tick_ms", trace.tick_ns, 1e6);
  if (trace.tick_ns < 1'000'000) f.fail("tick_ms", "must be at least 1");
  f.number("timeslice_us", trace.timeslice_ns, 1e3);
  f.flag("report_busy", trace.report_busy);
  f.flag("report_in_flight", trace.report_in_flight);
  if (const json* names = f.list("policies"))
    for (const json& name : *names) {
      if (!name.is_string()) {
        f.fail("policies", "must list policy names as strings");
        break;
      }
      trace.policies.push_back(name.get<std::string>());
    }
  const json* jobs = f.list("jobs");
  if (!jobs || jobs->empty()) f.fail("jobs", "must list at least one job");
  std::string error = f.finish();
  if (!error.empty()) return error;

  std::set<std::string> names;
  for (size_t i = 0; i < jobs->size(); ++i) {
    JobSpec job;
    error = load_job((*jobs)[i], i, job);
    if (!error.empty()) return path + ": " + error;
    if (!names.insert(job.name).second) return path + ": two jobs are named '" + job.name + "'";
    trace.jobs.push_back(job);
  }
  return {};
}

}  // namespace gpushare::sim
