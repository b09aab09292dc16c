#include "mps_config.h"

#include <nlohmann/json.hpp>

namespace gpushare::daemon {
namespace {

using nlohmann::json;

std::string shown(const json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace

const char* mps_mode_name(MpsMode mode) {
  switch (mode) {
    case MpsMode::off:
      return "off";
    case MpsMode::automatic:
      return "auto";
    case MpsMode::external:
      return "external";
  }
  return "?";
}

void parse_mps_config(const json& document, MpsConfig* out, std::vector<std::string>* errors) {
  if (document.contains("mps")) {
    const json& v = document["mps"];
    std::string name = v.is_string() ? v.get<std::string>() : "";
    if (name == "off")
      out->mode = MpsMode::off;
    else if (name == "auto")
      out->mode = MpsMode::automatic;
    else if (name == "external")
      out->mode = MpsMode::external;
    else
      errors->push_back("mps: expected one of \"auto\", \"off\", \"external\", got " + shown(v));
  }
  if (document.contains("mps_thread_percentage")) {
    const json& v = document["mps_thread_percentage"];
    if (v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 100)
      out->thread_percentage = static_cast<int>(v.get<int64_t>());
    else
      errors->push_back("mps_thread_percentage: expected an integer in [1, 100], got " + shown(v));
  }
  if (document.contains("mps_pipe_directory")) {
    const json& v = document["mps_pipe_directory"];
    std::string path = v.is_string() ? v.get<std::string>() : "";
    if (path.empty() || path[0] != '/' || path.size() > kMpsPipeDirectoryMax)
      errors->push_back("mps_pipe_directory: expected an absolute path of at most " +
                        std::to_string(kMpsPipeDirectoryMax) + " bytes, got " + shown(v));
    else
      out->pipe_directory = path;
    // `auto` puts its pipes next to the daemon's socket; a second place would be ignored silently.
    if (out->mode == MpsMode::automatic)
      errors->push_back(
          "mps_pipe_directory: only for \"mps\": \"external\" (\"auto\" uses <the socket's "
          "folder>/mps/pipe)");
  }
}

}  // namespace gpushare::daemon
