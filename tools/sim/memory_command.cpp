// `gpushare-sim memory`: the memory model (memory_model.h) on the thesis-shaped case, a case file
// or generated cases. For each case it prints the makespan of every schedule (FIFO without and with
// prefetch, an optional fixed order, the thesis weight order, the genetic search seeded with the
// weight order and started from random orders alone), and what the search cost; over generated
// cases, the gap between the weight order and the search; on a trace gpushared recorded
// (`--trace`), each prediction beside the makespan measured. Format: docs/simulator.md.
#include "memory_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "memory_case_file.h"
#include "memory_schedules.h"
#include "memory_trace_file.h"
#include "order_search.h"

namespace gpushare::sim {
namespace {

using policies::RotationOrder;

struct Options {
  std::string case_path;   // a case file instead of the thesis-shaped case
  std::string trace_path;  // a trace gpushared recorded (memory.trace) instead
  int trace_device = 0;
  size_t generated = 0;  // generated cases instead
  uint64_t case_seed = 1;
  size_t jobs = 5;
  SearchParameters search;
  double min_turn_s = 0;
  double turn_per_swap_in = 0;
  std::string fixed_order;  // job names, comma-separated
  bool writeback = false;
  bool timeline = false;
};

struct Row {
  std::string schedule;
  MemoryRun run;
  StepOrder order;
};

struct SearchCost {
  uint64_t evaluations = 0;
  double wall_ms = 0;  // the tool's own time (reported, never tested)
};

policies::RotationParameters rotation(const Options& options, RotationOrder order, bool prefetch) {
  policies::RotationParameters parameters = one_step_turns(order, prefetch);
  parameters.min_turn_s = options.min_turn_s;
  parameters.turn_per_swap_in = options.turn_per_swap_in;
  return parameters;
}

// "b,a,c" to job ids, or an error naming the unknown job.
std::string parse_fixed_order(const MemoryCase& memory_case, const std::string& names,
                              std::vector<uint64_t>& ids) {
  std::stringstream stream(names);
  for (std::string name; std::getline(stream, name, ',');) {
    auto found = std::find_if(memory_case.jobs.begin(), memory_case.jobs.end(),
                              [&](const MemoryJob& job) { return job.name == name; });
    if (found == memory_case.jobs.end()) return "--fixed-order names no job '" + name + "'";
    ids.push_back(static_cast<uint64_t>(found - memory_case.jobs.begin()));
  }
  return {};
}

std::string order_text(const MemoryCase& memory_case, const StepOrder& order) {
  std::string text;
  for (size_t job : order) text += (text.empty() ? "" : " ") + memory_case.jobs[job].name;
  return text;
}

SearchResult timed_search(const MemoryCase& memory_case, const SearchParameters& parameters,
                          SearchCost& cost) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult result = search_order(memory_case, parameters);
  cost.evaluations += result.evaluations;
  cost.wall_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// Every schedule on one case; the search's costs are added to `cost`.
std::vector<Row> run_case(const MemoryCase& memory_case, const Options& options,
                          const std::vector<uint64_t>& fixed, SearchCost& cost) {
  std::vector<Row> rows;
  auto add = [&](std::string label, StepOrder order, bool prefetch) {
    rows.push_back({std::move(label), run_schedule(memory_case, order, prefetch), order});
  };
  auto rotated = [&](RotationOrder order, bool prefetch) {
    return rotation_schedule(memory_case, rotation(options, order, prefetch));
  };
  add("fifo, no prefetch", rotated(RotationOrder::fifo, false), false);
  add("fifo, prefetch", rotated(RotationOrder::fifo, true), true);
  if (!fixed.empty()) {
    policies::RotationParameters parameters = rotation(options, RotationOrder::fixed, true);
    parameters.fixed_order = fixed;
    add("fixed, prefetch", rotation_schedule(memory_case, parameters), true);
  }
  const StepOrder weighted = rotated(RotationOrder::weight, true);
  add("weight, prefetch", weighted, true);
  SearchParameters seeded = options.search;
  seeded.seeds = {weighted};
  add("search from weight", timed_search(memory_case, seeded, cost).best, true);
  add("search from random", timed_search(memory_case, options.search, cost).best, true);
  return rows;
}

// Copy time that overlapped compute; never below 0 (rounding of equal sums).
double hidden_s(const MemoryRun& run) {
  return std::max(0.0, run.copy_s - run.stall_s);
}

// Per schedule over all cases: sums of makespan / compute and of the hidden share of the copies.
struct Totals {
  std::string schedule;
  double stretch = 0, hidden = 0;
  size_t cases = 0;
};

void add_totals(std::vector<Totals>& totals, const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    auto found = std::find_if(totals.begin(), totals.end(),
                              [&](const Totals& t) { return t.schedule == row.schedule; });
    if (found == totals.end()) found = totals.insert(totals.end(), {row.schedule});
    found->stretch += row.run.compute_s > 0 ? row.run.makespan_s / row.run.compute_s : 0;
    found->hidden += row.run.copy_s > 0 ? hidden_s(row.run) / row.run.copy_s : 1;
    ++found->cases;
  }
}

void print_case(const MemoryCase& memory_case, const std::string& title,
                const std::vector<Row>& rows, bool timeline) {
  uint64_t total = 0;
  for (const MemoryJob& job : memory_case.jobs) total += job.bytes;
  std::printf(
      "%s: %zu jobs, %.2f GiB of working sets in %.2f GiB left by production\n", title.c_str(),
      memory_case.jobs.size(), static_cast<double>(total) / (1 << 30),
      static_cast<double>(memory_case.capacity_bytes - memory_case.production_bytes) / (1 << 30));
  std::printf("  %-20s %10s %9s %9s %9s %8s  %s\n", "schedule", "makespan", "compute", "copy",
              "hidden", "swap-ins", "order");
  for (const Row& row : rows) {
    std::printf("  %-20s %10.1f %9.1f %9.1f %9.1f %8u  %s\n", row.schedule.c_str(),
                row.run.makespan_s, row.run.compute_s, row.run.copy_s, hidden_s(row.run),
                row.run.swap_ins, order_text(memory_case, row.order).c_str());
    if (!timeline) continue;
    for (const StepTimes& step : row.run.steps) {
      std::printf("      %-8s", memory_case.jobs[step.job].name.c_str());
      if (step.copied)
        std::printf(" copy %9.1f-%-9.1f", step.copy_start_s, step.copy_end_s);
      else
        std::printf(" %24s", "resident");
      std::printf(" compute %9.1f-%.1f\n", step.compute_start_s, step.compute_end_s);
    }
  }
}

// The model's predictions against the makespan gpushared recorded (first to last burst).
void print_measured(const std::vector<Row>& rows, double measured_s) {
  std::printf("  %-20s %10.3f  (recorded: first to last opportunistic burst)\n", "measured",
              measured_s);
  for (const Row& row : rows)
    std::printf("  predicted %-20s %10.3f  %+.0f %% of measured\n", row.schedule.c_str(),
                row.run.makespan_s,
                measured_s > 0 ? 100 * (row.run.makespan_s - measured_s) / measured_s : 0.0);
}

double makespan_of(const std::vector<Row>& rows, const std::string& schedule) {
  for (const Row& row : rows)
    if (row.schedule == schedule) return row.run.makespan_s;
  return 0;
}

}  // namespace

int memory_main(int argc, char** argv) {
  CLI::App app{
      "Runs the memory model (jobs that copy their working set in before each step, one copy "
      "engine, one compute engine) on the thesis-shaped case or on generated cases, and compares "
      "the rotation orders with a genetic search.",
      "gpushare-sim memory"};
  Options options;
  app.add_option("--case", options.case_path, "a case file (JSON, docs/simulator.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--trace", options.trace_path,
                 "a trace gpushared recorded (memory.trace, docs/memory.md): its case, and the "
                 "predictions beside the makespan measured")
      ->check(CLI::ExistingFile);
  app.add_option("--trace-device", options.trace_device, "the device of --trace to replay")
      ->check(CLI::Range(0, 1023));
  app.add_option("--generated", options.generated,
                 "run this many generated cases instead of the thesis-shaped one");
  app.add_option("--case-seed", options.case_seed, "seed of the first generated case");
  app.add_option("--jobs", options.jobs, "jobs per generated case")->check(CLI::Range(1, 64));
  app.add_option("--population", options.search.population, "search: candidates per generation");
  app.add_option("--survivors", options.search.survivors,
                 "search: candidates kept each generation");
  app.add_option("--generations", options.search.generations, "search: generations");
  app.add_option("--mutation", options.search.mutation_rate, "search: mutation probability")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--search-seed", options.search.seed, "search: random seed");
  app.add_option("--min-turn", options.min_turn_s, "rotation: shortest turn (time units)");
  app.add_option("--turn-per-swap-in", options.turn_per_swap_in,
                 "rotation: a turn lasts at least this many next swap-ins (0 and --min-turn 0: "
                 "one step a turn, as in the thesis)");
  app.add_option("--fixed-order", options.fixed_order,
                 "also run this fixed rotation order, e.g. D,B,C,A (thesis case)");
  app.add_flag("--writeback", options.writeback,
               "a job going out is copied back to the host on the same engine");
  app.add_flag("--timeline", options.timeline, "print every step's copy and compute times");
  CLI11_PARSE(app, argc, argv);

  std::vector<MemoryCase> cases;
  std::vector<std::string> titles;
  std::optional<double> measured_s;  // --trace: the makespan recorded
  if (!options.trace_path.empty() && (!options.case_path.empty() || options.generated > 0)) {
    std::cerr << "gpushare-sim memory: --trace replaces --case and --generated; give one\n";
    return 2;
  }
  if (!options.trace_path.empty()) {
    Recording recording;
    Replay replay;
    // The file's errors name it and the line; the replay's name what the recording lacks.
    std::string error = load_memory_trace(options.trace_path, options.trace_device, recording);
    if (error.empty())
      if (std::string lacking = replay_case(recording, replay); !lacking.empty())
        error = options.trace_path + ": " + lacking;
    if (!error.empty()) {
      std::cerr << "gpushare-sim memory: " << error << "\n";
      return 2;
    }
    cases.push_back(replay.memory_case);
    titles.push_back("recorded trace " + options.trace_path + " (seconds)");
    measured_s = replay.measured_makespan_s;
  } else if (!options.case_path.empty()) {
    MemoryCase from_file;
    if (const std::string error = load_memory_case(options.case_path, from_file); !error.empty()) {
      std::cerr << "gpushare-sim memory: " << error << "\n";
      return 2;
    }
    cases.push_back(from_file);
    titles.push_back(options.case_path);
  } else if (options.generated == 0) {
    cases.push_back(thesis_shaped_case());
    titles.push_back("thesis-shaped case (time units: 1 MiB copied)");
  }
  for (size_t k = 0; k < options.generated; ++k) {
    cases.push_back(generated_case(options.case_seed + k, options.jobs));
    titles.push_back("generated case " + std::to_string(options.case_seed + k) + " (seconds)");
  }

  SearchCost cost;
  std::vector<double> gaps, random_gaps, fifo_gaps;
  std::vector<Totals> totals;
  for (size_t k = 0; k < cases.size(); ++k) {
    MemoryCase& memory_case = cases[k];
    memory_case.writeback = memory_case.writeback || options.writeback;
    if (const std::string error = check_case(memory_case); !error.empty()) {
      std::cerr << "gpushare-sim memory: " << titles[k] << ": " << error << "\n";
      return 2;
    }
    std::vector<uint64_t> fixed;
    if (const std::string error = parse_fixed_order(memory_case, options.fixed_order, fixed);
        !error.empty()) {
      std::cerr << "gpushare-sim memory: " << error << "\n";
      return 2;
    }
    const std::vector<Row> rows = run_case(memory_case, options, fixed, cost);
    print_case(memory_case, titles[k], rows, options.timeline);
    if (measured_s) print_measured(rows, *measured_s);
    add_totals(totals, rows);
    const double weighted = makespan_of(rows, "weight, prefetch");
    gaps.push_back((weighted - makespan_of(rows, "search from weight")) / weighted);
    random_gaps.push_back((weighted - makespan_of(rows, "search from random")) / weighted);
    fifo_gaps.push_back((makespan_of(rows, "fifo, prefetch") - weighted) /
                        makespan_of(rows, "fifo, prefetch"));
  }

  auto summary = [](const std::vector<double>& values) {
    double sum = 0;
    for (double value : values) sum += value;
    char text[96];
    std::snprintf(text, sizeof text, "mean %.1f %%, min %.1f %%, max %.1f %%",
                  100 * sum / static_cast<double>(values.size()),
                  100 * *std::min_element(values.begin(), values.end()),
                  100 * *std::max_element(values.begin(), values.end()));
    return std::string(text);
  };
  std::printf("\nmean over %zu case(s): %-20s %16s %13s\n", cases.size(), "schedule",
              "makespan/compute", "copy hidden");
  for (const Totals& t : totals)
    std::printf("%24s%-20s %16.3f %12.0f %%\n", "", t.schedule.c_str(),
                t.stretch / static_cast<double>(t.cases),
                100 * t.hidden / static_cast<double>(t.cases));
  std::printf(
      "%zu case(s); makespan the search saves over the weight order: %s (from random "
      "orders alone: %s)\n",
      cases.size(), summary(gaps).c_str(), summary(random_gaps).c_str());
  std::printf("weight order over fifo with prefetch: %s\n", summary(fifo_gaps).c_str());
  std::printf(
      "search cost: %llu schedules simulated in %.1f ms (%.1f us each; population %zu, "
      "%zu generations, 2 searches per case)\n",
      static_cast<unsigned long long>(cost.evaluations), cost.wall_ms,
      cost.evaluations ? 1000 * cost.wall_ms / static_cast<double>(cost.evaluations) : 0,
      options.search.population, options.search.generations);
  return 0;
}

}  // namespace gpushare::sim
