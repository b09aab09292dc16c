// A GPU's UUID: the 16 bytes cuDeviceGetUuid_v2 gives, and the text NVML, nvidia-smi and
// CUDA_VISIBLE_DEVICES use for them ("GPU-" then 8-4-4-4-12 lowercase hex digits). The UUID names
// one device on the whole machine; an ordinal names one only within a process.
//
// Plain functions without allocation or exceptions: the shim, the daemon and the tests share them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "wire.h"

namespace gpushare::protocol {

using DeviceUuid = std::array<uint8_t, kDeviceUuidSize>;

// "GPU-" + 36 characters + NUL.
inline constexpr size_t kDeviceUuidTextSize = 4 + 36 + 1;

// Writes the text form into `out` (NUL-terminated).
inline void format_device_uuid(const DeviceUuid& uuid, char (&out)[kDeviceUuidTextSize]) {
  constexpr char kHex[] = "0123456789abcdef";
  size_t n = 0;
  for (char c : std::string_view("GPU-")) out[n++] = c;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[n++] = '-';
    out[n++] = kHex[uuid[i] >> 4];
    out[n++] = kHex[uuid[i] & 0xf];
  }
  out[n] = '\0';
}

// Parses the text form: "GPU-" (any case) and 32 hex digits of either case, with the dashes where
// NVML writes them. Anything else (a MIG instance's "MIG-…", a prefix, a stray character) is
// nullopt.
inline std::optional<DeviceUuid> parse_device_uuid(std::string_view text) {
  if (text.size() != kDeviceUuidTextSize - 1) return std::nullopt;
  if ((text[0] != 'G' && text[0] != 'g') || (text[1] != 'P' && text[1] != 'p') ||
      (text[2] != 'U' && text[2] != 'u') || text[3] != '-')
    return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  DeviceUuid uuid{};
  size_t pos = 4;
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      if (text[pos++] != '-') return std::nullopt;
    }
    int high = digit(text[pos++]);
    int low = digit(text[pos++]);
    if (high < 0 || low < 0) return std::nullopt;
    uuid[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return uuid;
}

}  // namespace gpushare::protocol
