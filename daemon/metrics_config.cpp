#include "metrics_config.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace gpushare::daemon {

std::optional<MetricsListen> parse_metrics_listen(const std::string& text, std::string* error) {
  MetricsListen listen;
  listen.text = text;
  if (!text.empty() && text[0] == '/') {
    if (text.size() > 107) {  // sun_path holds 108 bytes with the terminating zero
      *error = "a Unix socket path of at most 107 bytes";
      return std::nullopt;
    }
    listen.unix_path = text;
    return listen;
  }
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    *error = "\"HOST:PORT\" (e.g. \"127.0.0.1:9450\") or an absolute Unix socket path";
    return std::nullopt;
  }
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {  // [::1]:9450
    if (host.size() < 3 || host.back() != ']') {
      *error = "an IPv6 host in brackets, e.g. \"[::1]:9450\"";
      return std::nullopt;
    }
    host = host.substr(1, host.size() - 2);
  }
  std::string port_text = text.substr(colon + 1);
  int port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 1 || port > 65535) {
    *error = "a port in 1..65535 after the colon";
    return std::nullopt;
  }
  listen.host = host;
  listen.port = port;
  return listen;
}

void parse_metrics_config(const nlohmann::json& section, MetricsConfig* out,
                          std::vector<std::string>* errors) {
  if (!section.is_object()) {
    errors->push_back("metrics: expected an object such as {\"listen\": \"127.0.0.1:9450\"}");
    return;
  }
  for (const auto& [key, value] : section.items())
    if (key != "listen") errors->push_back("metrics." + key + ": unknown field (expected: listen)");
  if (!section.contains("listen")) return;
  const nlohmann::json& listen = section["listen"];
  if (!listen.is_string()) {
    errors->push_back("metrics.listen: expected a string, got " + listen.dump());
    return;
  }
  std::string error;
  out->listen = parse_metrics_listen(listen.get<std::string>(), &error);
  if (!out->listen)
    errors->push_back("metrics.listen: expected " + error + ", got " + listen.dump());
}

}  // namespace gpushare::daemon
