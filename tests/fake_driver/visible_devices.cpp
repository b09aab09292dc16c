#include "visible_devices.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace gpushare::fake {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The physical device a numeric entry names, or -1.
int by_index(std::string_view entry, int count) {
  if (entry.empty() || entry.size() > 4) return -1;
  int index = 0;
  for (char c : entry) {
    if (c < '0' || c > '9') return -1;
    index = index * 10 + (c - '0');
  }
  return index < count ? index : -1;
}

// The one device whose UUID starts with the entry's hex digits ("GPU-" stripped, dashes
// ignored), or -1 when none or several do.
int by_uuid(std::string_view entry, const std::vector<protocol::DeviceUuid>& uuids) {
  if (entry.size() < 4 || (entry.substr(0, 4) != "GPU-" && entry.substr(0, 4) != "gpu-")) return -1;
  std::string digits;
  for (char c : entry.substr(4)) {
    if (c == '-') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return -1;
    digits += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (digits.empty() || digits.size() > 2 * protocol::kDeviceUuidSize) return -1;
  int found = -1;
  for (size_t i = 0; i < uuids.size(); ++i) {
    char text[protocol::kDeviceUuidTextSize];
    protocol::format_device_uuid(uuids[i], text);
    std::string hex;
    for (const char* p = text + 4; *p; ++p)
      if (*p != '-') hex += *p;
    if (hex.compare(0, digits.size(), digits) != 0) continue;
    if (found >= 0) return -1;  // ambiguous prefix
    found = static_cast<int>(i);
  }
  return found;
}

}  // namespace

std::vector<int> visible_devices(const char* value,
                                 const std::vector<protocol::DeviceUuid>& uuids) {
  const int count = static_cast<int>(uuids.size());
  std::vector<int> visible;
  if (value == nullptr) {
    for (int i = 0; i < count; ++i) visible.push_back(i);
    return visible;
  }
  std::string_view rest = value;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view entry = trim(rest.substr(0, comma));
    int device = by_index(entry, count);
    if (device < 0) device = by_uuid(entry, uuids);
    if (device < 0 || std::find(visible.begin(), visible.end(), device) != visible.end()) break;
    visible.push_back(device);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return visible;
}

}  // namespace gpushare::fake
