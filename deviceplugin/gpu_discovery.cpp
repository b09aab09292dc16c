#include "gpu_discovery.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpushare::deviceplugin {

std::optional<std::string> uuid_from_information(std::string_view text) {
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    constexpr std::string_view kKey = "GPU UUID:";
    if (line.substr(0, kKey.size()) != kKey) continue;
    std::string_view value = line.substr(kKey.size());
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r'))
      value.remove_suffix(1);
    if (value.rfind("GPU-", 0) != 0) return std::nullopt;
    return std::string(value);
  }
  return std::nullopt;
}

std::vector<std::string> discover_gpus(const std::string& info_dir,
                                       std::vector<std::string>* problems) {
  std::vector<std::filesystem::path> folders;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(info_dir, ec))
    if (entry.is_directory()) folders.push_back(entry.path());
  if (ec) problems->push_back(info_dir + ": " + ec.message());
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> uuids;
  for (const auto& folder : folders) {
    std::ifstream in(folder / "information");
    std::stringstream text;
    text << in.rdbuf();
    if (auto uuid = uuid_from_information(text.str()))
      uuids.push_back(*uuid);
    else
      problems->push_back((folder / "information").string() + ": no GPU UUID line");
  }
  return uuids;
}

}  // namespace gpushare::deviceplugin
