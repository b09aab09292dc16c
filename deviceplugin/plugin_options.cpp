#include "plugin_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <sstream>

namespace gpushare::deviceplugin {
namespace {

bool dns_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.back() == '.' || s.front() == '-')
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

void absolute(std::vector<std::string>& errors, const std::string& flag, const std::string& path) {
  if (path.empty() || path[0] != '/')
    errors.push_back(flag + ": expected an absolute path, got '" + path + "'");
}

}  // namespace

ParsedOptions parse_plugin_options(int argc, const char* const* argv) {
  ParsedOptions parsed;
  PluginOptions o;
  o.allocation.library = "/usr/lib/x86_64-linux-gnu/gpushare/libgpushare.so";
  o.allocation.socket_dir = "/run/gpushare";
  CLI::App app{
      "gpushare-device-plugin: advertises GPU shares as <prefix>/production and "
      "<prefix>/opportunistic to the kubelet and injects gpushare into the containers that get "
      "them (docs/kubernetes.md)"};
  app.add_option("--device-plugin-dir", o.device_plugin_dir,
                 "the kubelet's device-plugin folder (kubelet.sock, the plugin's sockets)")
      ->capture_default_str();
  app.add_option("--pod-resources-socket", o.pod_resources_socket,
                 "the kubelet's PodResources socket")
      ->capture_default_str();
  app.add_option("--state-dir", o.state_dir,
                 "allocation tokens and the map gpushared reads (its kubernetes.allocations)")
      ->capture_default_str();
  app.add_option("--gpus", o.gpus, "GPU UUIDs or indices, comma-separated (default: discovered)")
      ->delimiter(',');
  app.add_option("--gpu-info-dir", o.gpu_info_dir, "where GPUs are discovered from")
      ->capture_default_str();
  app.add_option("--resource-prefix", o.resource_prefix, "extended-resource domain")
      ->capture_default_str();
  app.add_option("--production-shares", o.production_shares, "production shares per GPU")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--opportunistic-shares", o.opportunistic_shares, "opportunistic shares per GPU")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--library", o.allocation.library,
                 "libgpushare.so on the host; its folder is mounted into containers")
      ->capture_default_str();
  app.add_option("--socket-dir", o.allocation.socket_dir,
                 "gpushared's socket folder on the host; mounted read-only into containers")
      ->capture_default_str();
  app.add_flag("--cdi", o.allocation.cdi, "also return the GPUs as CDI device names");
  app.add_option("--cdi-kind", o.allocation.cdi_kind, "CDI vendor/class of the GPUs")
      ->capture_default_str();
  app.add_option("--watch-interval-ms", o.watch_interval_ms,
                 "how often the kubelet's socket is checked for a kubelet restart")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_option("--pod-resources-interval-ms", o.pod_resources_interval_ms,
                 "how often the kubelet's PodResources are listed")
      ->check(CLI::Range(10, 600000))
      ->capture_default_str();
  app.add_option("--token-grace-s", o.token_grace_s,
                 "how long an allocation no container holds is kept")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--log-level", o.log_level)
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.set_version_flag("--version", GPUSHARE_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::ostringstream out;
    parsed.exit_code = app.exit(e, out, out);
    std::fputs(out.str().c_str(), stdout);
    parsed.exit_now = true;
    return parsed;
  } catch (const CLI::CallForVersion& e) {
    std::ostringstream out;
    parsed.exit_code = app.exit(e, out, out);
    std::fputs(out.str().c_str(), stdout);
    parsed.exit_now = true;
    return parsed;
  } catch (const CLI::ParseError& e) {
    parsed.errors.push_back(e.what());
    return parsed;
  }
  parsed.errors = check_plugin_options(o);
  if (parsed.errors.empty()) parsed.options = std::move(o);
  return parsed;
}

std::vector<std::string> check_plugin_options(const PluginOptions& o) {
  std::vector<std::string> errors;
  absolute(errors, "--device-plugin-dir", o.device_plugin_dir);
  absolute(errors, "--pod-resources-socket", o.pod_resources_socket);
  absolute(errors, "--state-dir", o.state_dir);
  absolute(errors, "--library", o.allocation.library);
  absolute(errors, "--socket-dir", o.allocation.socket_dir);
  if (!dns_subdomain(o.resource_prefix))
    errors.push_back("--resource-prefix: expected a DNS subdomain such as gpushare.io, got '" +
                     o.resource_prefix + "'");
  std::set<std::string> seen;
  for (const auto& gpu : o.gpus) {
    // The kubelet limits a device id to 63 characters; "-s<k>" takes up to 5.
    bool ok = !gpu.empty() && gpu.size() <= 58 && std::all_of(gpu.begin(), gpu.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
    });
    if (!ok)
      errors.push_back("--gpus: '" + gpu +
                       "' is not a GPU UUID or index (letters, digits and '-', at most 58)");
    else if (!seen.insert(gpu).second)
      errors.push_back("--gpus: '" + gpu + "' is given twice");
  }
  return errors;
}

std::vector<ResourceClass> resource_classes(const PluginOptions& o) {
  return {
      {"production", o.resource_prefix + "/production", "gpushare-production.sock",
       o.production_shares},
      {"opportunistic", o.resource_prefix + "/opportunistic", "gpushare-opportunistic.sock",
       o.opportunistic_shares},
  };
}

}  // namespace gpushare::deviceplugin
