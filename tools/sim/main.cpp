// gpushare-sim: replays a trace through the policies on a model of one GPU and prints each job's
// normalized throughput (NT: kernels completed shared / kernels completed alone, same schedule),
// so schedules can be compared offline. Format and model: docs/policies.md, "Simulator".
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "engine.h"
#include "expectation.h"
#include "memory_command.h"
#include "trace.h"

namespace {

using namespace gpushare;

struct PolicyRun {
  std::string label;  // as given: "tgs" or "tgs:target=0.9,control_period_ms=100"
  std::vector<sim::JobResult> results;
};

// "name" or "name:key=value,key=value".
policies::MakePolicyResult policy_from_label(const std::string& label) {
  const size_t colon = label.find(':');
  policies::Parameters parameters;
  if (colon != std::string::npos) {
    const std::string error = policies::parse_parameters(label.substr(colon + 1), parameters);
    if (!error.empty()) return {nullptr, error};
  }
  return policies::make_policy(label.substr(0, colon), parameters);
}

// NT of one bucket; none where the job did (almost) nothing alone in it, e.g. a production job
// "while production is off", which only counts the kernels finishing after its phase ended.
std::optional<double> ratio(uint64_t shared, uint64_t alone, uint64_t alone_total) {
  if (alone == 0 || alone * 100 < alone_total) return std::nullopt;
  return static_cast<double>(shared) / static_cast<double>(alone);
}

std::string shown(std::optional<double> value) {
  if (!value) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", *value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "memory") return sim::memory_main(argc - 1, argv + 1);
  CLI::App app{
      "Replays a GPU-sharing trace through gpushare's policies and prints each job's "
      "normalized throughput. `gpushare-sim memory --help`: the memory model (rotation, "
      "prefetch, order search)."};
  std::string trace_path, timeline_path;
  std::vector<std::string> labels, expectations;
  bool csv = false;
  app.add_option("trace", trace_path, "trace file (JSON, see docs/policies.md)")->required();
  app.add_option("-p,--policy", labels,
                 "policy to simulate, e.g. tgs or tgs:target=0.9 (repeatable; default: the "
                 "trace's list, else none,tgs,priority,fair)");
  app.add_option("-e,--expect", expectations,
                 "check, e.g. \"tgs/prod >= none/prod + 0.3\"; exit status 1 if any fails");
  app.add_option("--timeline", timeline_path, "write per-tick GPU share of every job (CSV)");
  app.add_flag("--csv", csv, "print results as CSV");
  CLI11_PARSE(app, argc, argv);

  sim::Trace trace;
  if (const std::string error = sim::load_trace(trace_path, trace); !error.empty()) {
    std::cerr << "gpushare-sim: " << error << "\n";
    return 2;
  }
  if (labels.empty()) labels = trace.policies;
  if (labels.empty()) labels = {"none", "tgs", "priority", "fair"};

  std::ofstream timeline_file;
  std::ostream* timeline = nullptr;
  if (!timeline_path.empty()) {
    timeline_file.open(timeline_path);
    if (!timeline_file) {
      std::cerr << "gpushare-sim: cannot write " << timeline_path << "\n";
      return 2;
    }
    timeline_file << "policy,time_s,job,gpu_share\n";
    timeline = &timeline_file;
  }

  // Each job alone, with the same schedule: the denominator of its NT.
  const size_t n = trace.jobs.size();
  std::vector<sim::JobResult> alone(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<bool> only(n, false);
    only[i] = true;
    auto none = policies::make_policy("none").policy;
    alone[i] = sim::simulate(trace, *none, only)[i];
  }

  std::vector<PolicyRun> runs;
  for (const std::string& label : labels) {
    auto made = policy_from_label(label);
    if (!made.policy) {
      std::cerr << "gpushare-sim: " << made.error << "\n";
      return 2;
    }
    runs.push_back(
        {label, sim::simulate(trace, *made.policy, std::vector<bool>(n, true), timeline, label)});
  }

  if (csv) {
    std::cout << "policy,job,class,kernels,alone_kernels,nt,nt_production_on,nt_production_off\n";
  } else {
    std::printf("%s: %.1f s, tick %.0f ms, %zu jobs\n", trace_path.c_str(),
                static_cast<double>(trace.duration_ns) / 1e9,
                static_cast<double>(trace.tick_ns) / 1e6, n);
    std::printf("%-28s %-16s %-13s %10s %10s %7s %8s %8s\n", "policy", "job", "class", "kernels",
                "alone", "NT", "NT(on)", "NT(off)");
  }
  std::map<std::string, double> nt;  // "policy/job[/on|/off]" -> NT, for --expect
  for (const PolicyRun& run : runs) {
    for (size_t i = 0; i < n; ++i) {
      const sim::JobSpec& job = trace.jobs[i];
      const sim::JobResult& r = run.results[i];
      const uint64_t total = alone[i].kernels;
      const auto whole = ratio(r.kernels, total, total);
      const auto on = ratio(r.kernels_while_on, alone[i].kernels_while_on, total);
      const auto off = ratio(r.kernels_while_off, alone[i].kernels_while_off, total);
      const std::string key = run.label + "/" + job.name;
      if (whole) nt[key] = *whole;
      if (on) nt[key + "/on"] = *on;
      if (off) nt[key + "/off"] = *off;
      const char* job_class =
          job.job_class == policies::JobClass::production ? "production" : "opportunistic";
      if (csv)
        std::cout << run.label << ',' << job.name << ',' << job_class << ',' << r.kernels << ','
                  << alone[i].kernels << ',' << shown(whole) << ',' << shown(on) << ','
                  << shown(off) << '\n';
      else
        std::printf("%-28s %-16s %-13s %10llu %10llu %7s %8s %8s\n", run.label.c_str(),
                    job.name.c_str(), job_class, static_cast<unsigned long long>(r.kernels),
                    static_cast<unsigned long long>(alone[i].kernels), shown(whole).c_str(),
                    shown(on).c_str(), shown(off).c_str());
    }
  }

  int status = 0;
  for (const std::string& expression : expectations) {
    const sim::ExpectationResult result =
        sim::check_expectation(expression, [&](const std::string& reference) {
          auto found = nt.find(reference);
          return found == nt.end() ? std::nullopt : std::optional<double>(found->second);
        });
    std::cout << (result.holds ? "expectation holds: " : "EXPECTATION FAILS: ")
              << result.explanation << "\n";
    if (!result.holds) status = 1;
  }
  return status;
}
