// gpusharectl: asks gpushared what runs where and steers it (docs/daemon.md).
#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "daemon_client.h"
#include "gpushare/protocol/ctl.h"
#include "gpushare/protocol/wire.h"
#include "record.h"
#include "tables.h"

#ifndef GPUSHARE_VERSION
#define GPUSHARE_VERSION "unknown"
#endif

using gpushare::ctl::Exchange;
using nlohmann::json;
namespace ctl = gpushare::protocol::ctl;

namespace {

// Documented in --help and docs/daemon.md; scripts rely on them.
enum ExitCode { kOk = 0, kRefused = 1, kUsage = 2, kUnreachable = 3 };

constexpr const char* kFooter = R"(Exit status:
  0  done
  1  the daemon refused the request or reported an error (the message says why)
  2  usage error
  3  the daemon is unreachable, or its reply was unreadable)";

constexpr const char* kCommands = "status, jobs, set-limit, set-priority, policy, reload, record";

// A size as set-limit takes it: digits with an optional K/M/G/T (binary), as the daemon parses
// it (daemon/memory_config.cpp); nullopt for anything else, 0 included.
std::optional<uint64_t> parse_size(const std::string& text) {
  size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || text.empty()) return std::nullopt;
  std::string suffix = digits == std::string::npos ? "" : text.substr(digits);
  int shift = suffix.empty()  ? 0
              : suffix == "K" ? 10
              : suffix == "M" ? 20
              : suffix == "G" ? 30
              : suffix == "T" ? 40
                              : -1;
  if (shift < 0 || text.size() - suffix.size() > 19) return std::nullopt;
  uint64_t n = std::stoull(text.substr(0, text.size() - suffix.size()));
  if (shift && n > (~uint64_t{0} >> shift)) return std::nullopt;
  return n << shift;
}

// The first word that is neither an option nor an option's value: what the user meant as the
// command.
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--socket" || a == "-o" || a == "--output") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] != '-') return a;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpusharectl: shows and steers the jobs registered with gpushared"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();  // -o and --socket also after the command
  std::string socket_path = "/run/gpushare/gpushared.sock";
  std::string output = "table";
  app.add_option("--socket", socket_path, "gpushared's socket")
      ->envname("GPUSHARE_SOCKET")
      ->capture_default_str();
  app.add_option("-o,--output", output, "output format")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.set_version_flag("--version", std::string("gpusharectl ") + GPUSHARE_VERSION);

  json request;
  auto* status = app.add_subcommand("status", "the daemon, its devices and their policies");
  auto* jobs =
      app.add_subcommand("jobs", "registered jobs: pid, job, class, device, kernels/s, memory");
  bool jobs_memory = false;
  jobs->add_flag("--memory", jobs_memory,
                 "memory per job: swap state, limit, allocation sites (GPUSHARE_TRACE_ALLOC=1)");
  auto* set_limit = app.add_subcommand(
      "set-limit", "cap a job's device memory (not root/admin group: only tighten your own)");
  std::string limit_target, limit_bytes;
  set_limit->add_option("target", limit_target, "pid, or job name (all jobs of that name)")
      ->required();
  set_limit->add_option("bytes", limit_bytes,
                        "bytes, with K/M/G/T (e.g. 8G); none: back to the configured rule; "
                        "unlimited: no limit at all")
      ->required();
  bool all_users = false;  // a job name that jobs of several users carry (docs/daemon.md)
  set_limit->add_flag("--all", all_users, "a job name of several users' jobs: act on all of them");
  auto* set_priority = app.add_subcommand(
      "set-priority", "change a job's class (others than root/admin group: only lower your own)");
  std::string target, job_class;
  set_priority->add_option("target", target, "pid, or job name (all jobs of that name)")
      ->required();
  set_priority->add_option("class", job_class, "production or opportunistic")
      ->required()
      ->check(CLI::IsMember({"production", "opportunistic"}));
  set_priority->add_flag("--all", all_users,
                         "a job name of several users' jobs: act on all of them");
  auto* policy = app.add_subcommand("policy", "choose the policy of a device (root/admin group)");
  std::string device_text, policy_name;
  policy->add_option("device", device_text, "device index")->required();
  policy->add_option("name", policy_name, "none, tgs, priority or fair")->required();
  std::string policy_parameters;
  policy->add_option("parameters", policy_parameters,
                     "e.g. target=0.9,control_period_ms=100 (ranges: docs/policies.md)");
  auto* reload =
      app.add_subcommand("reload", "re-read the daemon's configuration (root/admin group)");
  auto* record = app.add_subcommand(
      "record", "write a timeline of every job's gate, launch rate and memory (Perfetto JSON)");
  double record_seconds = 10;
  std::string record_path;
  record->add_option("--seconds", record_seconds, "how long to record")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  record->add_option("-o,--output", record_path, "trace file (open in ui.perfetto.dev)")
      ->required();

  // Negative numbers are values here (`policy -1 ...`), never options.
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] == '-' && std::isdigit(static_cast<unsigned char>(argv[i][1]))) {
      if (first_word(argc, argv) == "policy")
        std::cerr << "gpusharectl: policy: device must be 0.."
                  << gpushare::protocol::kMaxDeviceIndex << ", got " << argv[i] << "\n";
      else
        std::cerr << "gpusharectl: " << argv[i] << ": negative numbers are not accepted\n";
      return kUsage;
    }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::string word = first_word(argc, argv);
    bool known = word.empty();
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == word;
    if (!known) {
      std::cerr << "gpusharectl: unknown command '" << word << "' (commands: " << kCommands
                << "; see --help)\n";
      return kUsage;
    }
    int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }

  if (record->parsed()) {
    std::string error = gpushare::ctl::record(socket_path, record_seconds, record_path);
    if (!error.empty()) {
      std::cerr << "gpusharectl: record: " << error << "\n";
      return kUnreachable;
    }
    std::cerr << "wrote " << record_path << " (open it in ui.perfetto.dev)\n";
    return kOk;
  }

  if (status->parsed()) request = {{ctl::kCommand, ctl::command::kStatus}};
  if (jobs->parsed()) request = {{ctl::kCommand, ctl::command::kJobs}};
  if (reload->parsed()) request = {{ctl::kCommand, ctl::command::kReload}};
  if (policy->parsed()) {
    int device = -1;
    if (device_text.find_first_not_of("0123456789") == std::string::npos && device_text.size() < 5)
      device = std::stoi(device_text);
    if (device < 0 || device > gpushare::protocol::kMaxDeviceIndex) {
      std::cerr << "gpusharectl: policy: device must be 0.." << gpushare::protocol::kMaxDeviceIndex
                << ", got " << device_text << "\n";
      return kUsage;
    }
    request = {{ctl::kCommand, ctl::command::kPolicy},
               {ctl::field::kDevice, device},
               {ctl::field::kPolicy, policy_name}};
    if (!policy_parameters.empty()) request[ctl::field::kParameters] = policy_parameters;
  }
  if (set_limit->parsed()) {
    request = {{ctl::kCommand, ctl::command::kSetLimit}};
    std::optional<uint64_t> size = parse_size(limit_bytes);
    if (limit_bytes != "none" && limit_bytes != "unlimited" && (!size || *size == 0)) {
      std::cerr << "gpusharectl: set-limit: '" << limit_bytes << "' "
                << (size ? "would refuse every allocation of the job (give none to return it to "
                           "its configured limit)"
                         : "is not a size: give bytes, or a number with K, M, G or T (e.g. 8G), "
                           "none or unlimited")
                << "\n";
      return kUsage;
    }
    request[ctl::field::kBytes] =
        limit_bytes == "none" ? json(nullptr) : json(limit_bytes);  // or "unlimited"
    bool all_digits = !limit_target.empty() &&
                      limit_target.find_first_not_of("0123456789") == std::string::npos;
    if (all_digits && limit_target.size() < 10)
      request[ctl::field::kPid] = std::stol(limit_target);
    else
      request[ctl::field::kJob] = limit_target;
  }
  if (set_priority->parsed()) {
    request = {{ctl::kCommand, ctl::command::kSetPriority}, {ctl::field::kClass, job_class}};
    bool all_digits =
        !target.empty() && target.find_first_not_of("0123456789") == std::string::npos;
    if (all_digits && target.size() < 10)
      request[ctl::field::kPid] = std::stol(target);
    else
      request[ctl::field::kJob] = target;
  }

  if (all_users) request[ctl::field::kAll] = true;
  Exchange x = gpushare::ctl::ask_daemon(socket_path, request);
  bool as_json = output == "json";
  if (x.outcome != Exchange::Outcome::replied) {
    if (as_json)
      std::cout << json{{"ok", false}, {"error", x.error}}.dump(2) << "\n";
    else
      std::cerr << "gpusharectl: " << x.error << "\n";
    return kUnreachable;
  }
  json& reply = x.reply;
  bool ok = reply.value("ok", false);
  // The MPS state is its own request (docs/mps.md); a daemon without it answers "unknown".
  json mps;
  if (status->parsed() && ok) {
    Exchange m = gpushare::ctl::ask_daemon(socket_path, json{{ctl::kCommand, ctl::command::kMps}});
    if (m.outcome == Exchange::Outcome::replied && m.reply.value("ok", false) &&
        m.reply.contains("mps"))
      mps = m.reply["mps"];
    if (mps.is_object()) reply["mps"] = mps;
  }
  if (as_json) {
    std::cout << reply.dump(2) << "\n";
    return ok ? kOk : kRefused;
  }
  if (!ok) {
    std::cerr << "gpusharectl: " << reply.value("error", std::string("the daemon refused")) << "\n";
    return kRefused;
  }
  try {
    if (status->parsed()) std::cout << gpushare::ctl::render_status(reply);
    if (jobs->parsed())
      std::cout << (jobs_memory ? gpushare::ctl::render_jobs_memory(reply)
                                : gpushare::ctl::render_jobs(reply));
    if (set_limit->parsed()) std::cout << gpushare::ctl::render_set_limit(reply);
    if (set_priority->parsed()) std::cout << gpushare::ctl::render_set_priority(reply);
    if (policy->parsed()) std::cout << gpushare::ctl::render_policy(reply);
    if (reload->parsed()) std::cout << "reloaded " << reply.value("config", std::string()) << "\n";
  } catch (const json::exception& e) {
    std::cerr << "gpusharectl: unexpected reply from gpushared: " << e.what() << "\n";
    return kUnreachable;
  }
  return kOk;
}
