// Runs a test client under the shim (or without it) against the fake driver, each test with its
// own simulated device file, report file and daemon socket path (no daemon listens there, so a
// daemon running on this machine cannot influence the counts).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shim_preload.h"
#include "subprocess.h"

namespace gpushare::testing {

// Paths of the built artefacts, from the build system (tests/interception/CMakeLists.txt).
inline const std::string kShim = GPUSHARE_SHIM_PATH;
inline const std::string kFakeDriverDir = GPUSHARE_FAKE_DRIVER_DIR;
inline const std::string kClientsDir = GPUSHARE_CLIENTS_DIR;

inline std::string client_path(const std::string& name) {
  return kClientsDir + "/" + name;
}

class ClientTest : public ::testing::Test {
 protected:
  std::string device_file() const { return dir_.file("device"); }
  std::string report_path() const { return dir_.file("report.json"); }

  // The environment of a client run: fake driver, own device file, report, no daemon; the shim
  // preloaded when `shim`. `extra` is added last (it may override any of these).
  Env env(bool shim = true, const Env& extra = {}) const {
    Env e{{"LD_LIBRARY_PATH", kFakeDriverDir},
          {"GPUSHARE_FAKE_DEVICE_FILE", device_file()},
          {"GPUSHARE_SOCKET", dir_.file("no-daemon.sock")},
          {"GPUSHARE_REPORT", report_path()}};
    if (shim) e["LD_PRELOAD"] = shim_preload(kShim);
    for (const auto& [k, v] : extra) e[k] = v;
    return e;
  }

  ProcessResult run(const std::string& client, const std::vector<std::string>& args,
                    bool shim = true, const Env& extra = {}) const {
    std::vector<std::string> argv{client_path(client)};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, env(shim, extra));
  }

  // The JSON line a client printed (the last line of its stdout); null when there is none.
  static nlohmann::json output_of(const ProcessResult& r) {
    std::string out = r.out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    size_t start = out.rfind('\n');
    std::string line = start == std::string::npos ? out : out.substr(start + 1);
    return nlohmann::json::parse(line, nullptr, false);
  }

  // The shim's exit report (docs/report.md); null when it was not written or is not JSON.
  nlohmann::json report(const std::string& path = "") const {
    std::string p = path.empty() ? report_path() : path;
    if (!file_exists(p)) return nullptr;
    return nlohmann::json::parse(read_file(p), nullptr, false);
  }

  TempDir dir_;
};

// Describes a run of the exercise (tests/clients/exercise.h) and the entry points it went
// through; expect_exercise_report() checks every count of the shim's report against it.
struct ExerciseRun {
  int launches = 3, graph_nodes = 2, alloc_rounds = 2, info_calls = 2, devices = 1;
  int alloc_device = 0;
  bool per_thread = false;
  // Successful and failed calls of cuGetProcAddress_v2 / cuGetProcAddress the client made.
  int proc_address_v2 = 0, proc_address_v2_failed = 0;
  int proc_address_v1 = 0, proc_address_v1_failed = 0;

  std::vector<std::string> args() const;  // the client's command-line options for this run
};

// Checks the report's calls, failed_calls, launches, graph_launches, allocations and memory of an
// exercise run, exactly, for every hooked symbol; and the client's own tally against them.
void expect_exercise_report(const nlohmann::json& report, const nlohmann::json& client,
                            const ExerciseRun& run);

// Checks that the client's hooked entry points point into the shim, under their exact names.
void expect_resolved_to_shim(const nlohmann::json& client, const ExerciseRun& run);
}  // namespace gpushare::testing
