// The "metrics" section of gpushared's configuration (docs/metrics.md): where /metrics is served.
// Off by default: an HTTP listener is one more thing an operator should choose to open.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpushare::daemon {

// Where the Prometheus endpoint listens: a TCP host and port, or a Unix socket path.
struct MetricsListen {
  std::string host;  // "127.0.0.1", "::1", "0.0.0.0"; empty for a Unix socket
  int port = 0;
  std::string unix_path;  // absolute; empty for TCP
  std::string text;       // as written, for log lines
};

struct MetricsConfig {
  std::optional<MetricsListen> listen;  // none: no endpoint (the default)
};

// "127.0.0.1:9450", "[::1]:9450" or "/run/gpushare/metrics.sock"; nullopt and `error` otherwise.
std::optional<MetricsListen> parse_metrics_listen(const std::string& text, std::string* error);

// Parses the section into `out`; each problem is appended to `errors` as "metrics.<key>: what".
void parse_metrics_config(const nlohmann::json& section, MetricsConfig* out,
                          std::vector<std::string>* errors);

}  // namespace gpushare::daemon
