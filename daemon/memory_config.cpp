#include "memory_config.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpushare/protocol/wire.h"

namespace gpushare::daemon {
namespace {

using nlohmann::json;

std::string shown(const json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

std::optional<CapacitySpec> parse_capacity(const std::string& path, const json& v,
                                           std::vector<std::string>* errors) {
  if (v.is_number_float()) {
    double f = v.get<double>();
    if (f > 0 && f <= 1) return CapacitySpec{std::nullopt, f};
  } else if (auto bytes = parse_bytes(v); bytes && *bytes > 0) {
    return CapacitySpec{bytes, std::nullopt};
  }
  errors->push_back(path + ": expected bytes (an integer or a string such as \"16G\") or a " +
                    "fraction of the physical size in (0, 1], got " + shown(v));
  return std::nullopt;
}

void parse_rotation(const json& r, bool oversubscribe, RotationConfig* out,
                    std::vector<std::string>* errors) {
  if (!r.is_object()) {
    errors->push_back("memory.rotation: expected an object such as {\"enabled\": true}, got " +
                      shown(r));
    return;
  }
  for (const auto& [key, value] : r.items())
    if (key != "enabled" && key != "order" && key != "fixed_order" && key != "prefetch" &&
        key != "min_turn_ms" && key != "turn_per_swap_in" && key != "growth_quiet_ms")
      errors->push_back("memory.rotation." + key +
                        ": unknown field (expected one of: enabled, fixed_order, growth_quiet_ms, "
                        "min_turn_ms, order, prefetch, turn_per_swap_in)");
  for (const char* key : {"enabled", "prefetch"}) {
    if (!r.contains(key)) continue;
    if (!r[key].is_boolean()) {
      errors->push_back(std::string("memory.rotation.") + key + ": expected true or false, got " +
                        shown(r[key]));
      continue;
    }
    (std::string(key) == "enabled" ? out->enabled : out->prefetch) = r[key].get<bool>();
  }
  if (out->enabled && !oversubscribe)
    errors->push_back(
        "memory.rotation.enabled: needs \"memory\": {\"oversubscribe\": true} (only swappable "
        "memory can take turns on the device)");
  if (r.contains("order")) {
    const json& v = r["order"];
    const std::string name = v.is_string() ? v.get<std::string>() : "";
    if (name == "weight")
      out->order = policies::RotationOrder::weight;
    else if (name == "fifo")
      out->order = policies::RotationOrder::fifo;
    else if (name == "fixed")
      out->order = policies::RotationOrder::fixed;
    else
      errors->push_back("memory.rotation.order: expected \"weight\", \"fifo\" or \"fixed\", got " +
                        shown(v));
  }
  if (r.contains("fixed_order")) {
    const json& v = r["fixed_order"];
    bool names = v.is_array() && !v.empty();
    for (const json& name : v.is_array() ? v : json::array())
      names = names && name.is_string() && !name.get<std::string>().empty() &&
              name.get<std::string>().size() < protocol::kJobNameSize;
    if (!names)
      errors->push_back(
          "memory.rotation.fixed_order: expected a list of job names of 1 to 63 characters, "
          "got " +
          shown(v));
    else
      out->fixed_order = v.get<std::vector<std::string>>();
  }
  const bool fixed = out->order == policies::RotationOrder::fixed;
  if (fixed && out->fixed_order.empty() && !r.contains("fixed_order"))
    errors->push_back(
        "memory.rotation.fixed_order: \"order\": \"fixed\" needs the list of job names");
  if (!fixed && r.contains("fixed_order"))
    errors->push_back("memory.rotation.fixed_order: used only with \"order\": \"fixed\"");
  if (r.contains("min_turn_ms")) {
    const json& v = r["min_turn_ms"];
    if (!v.is_number_integer() || v.get<int64_t>() < 10 || v.get<int64_t>() > 3600000)
      errors->push_back("memory.rotation.min_turn_ms: expected an integer in [10, 3600000], got " +
                        shown(v));
    else
      out->min_turn = std::chrono::milliseconds(v.get<int64_t>());
  }
  if (r.contains("growth_quiet_ms")) {
    const json& v = r["growth_quiet_ms"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 600000)
      errors->push_back(
          "memory.rotation.growth_quiet_ms: expected an integer in [0, 600000], got " + shown(v));
    else
      out->growth_quiet = std::chrono::milliseconds(v.get<int64_t>());
  }
  if (r.contains("turn_per_swap_in")) {
    const json& v = r["turn_per_swap_in"];
    if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1000))
      errors->push_back("memory.rotation.turn_per_swap_in: expected a number in [0, 1000], got " +
                        shown(v));
    else
      out->turn_per_swap_in = v.get<double>();
  }
}

}  // namespace

std::optional<uint64_t> CapacitySpec::resolve(uint64_t physical) const {
  if (bytes) return *bytes;
  if (fraction && physical > 0)
    return static_cast<uint64_t>(std::floor(*fraction * static_cast<double>(physical)));
  return std::nullopt;
}

std::optional<uint64_t> parse_bytes(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    int64_t n = v.get<int64_t>();
    return n >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(n)) : std::nullopt;
  }
  if (!v.is_string()) return std::nullopt;
  std::string text = v.get<std::string>();
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  char* end = nullptr;
  unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  int shift = 0;
  if (*end == 'K') shift = 10;
  if (*end == 'M') shift = 20;
  if (*end == 'G') shift = 30;
  if (*end == 'T') shift = 40;
  if (shift) ++end;
  if (*end != '\0' || (shift && n > (~0ull >> shift))) return std::nullopt;
  return static_cast<uint64_t>(n) << shift;
}

void parse_memory_config(const json& s, MemoryConfig* out, std::vector<std::string>* errors) {
  if (!s.is_object()) {
    errors->push_back("memory: expected an object, got " + shown(s));
    return;
  }
  for (const auto& [key, value] : s.items())
    if (key != "capacity" && key != "devices" && key != "reserve" && key != "limits" &&
        key != "swap_timeout_ms" && key != "oversubscribe" && key != "nvml_sample_ms" &&
        key != "declaration_grace_ms" && key != "rotation" && key != "trace")
      errors->push_back("memory." + key +
                        ": unknown field (expected one of: capacity, declaration_grace_ms, "
                        "devices, limits, nvml_sample_ms, oversubscribe, reserve, rotation, "
                        "swap_timeout_ms, trace)");
  if (s.contains("oversubscribe")) {
    if (!s["oversubscribe"].is_boolean())
      errors->push_back("memory.oversubscribe: expected true or false, got " +
                        shown(s["oversubscribe"]));
    else
      out->oversubscribe = s["oversubscribe"].get<bool>();
  }
  if (s.contains("capacity"))
    out->capacity = parse_capacity("memory.capacity", s["capacity"], errors);
  if (s.contains("reserve")) {
    if (auto bytes = parse_bytes(s["reserve"]))
      out->reserve_bytes = *bytes;
    else
      errors->push_back("memory.reserve: expected bytes such as \"1G\", got " +
                        shown(s["reserve"]));
  }
  if (s.contains("devices")) {
    const json& devices = s["devices"];
    if (!devices.is_object()) {
      errors->push_back("memory.devices: expected an object such as {\"0\": \"16G\"}, got " +
                        shown(devices));
    } else {
      for (const auto& [key, value] : devices.items()) {
        char* end = nullptr;
        long index = std::strtol(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || index < 0 || index > protocol::kMaxDeviceIndex) {
          errors->push_back("memory.devices." + key + ": a device key must be a device index 0.." +
                            std::to_string(protocol::kMaxDeviceIndex));
          continue;
        }
        if (auto c = parse_capacity("memory.devices." + key, value, errors))
          out->devices[static_cast<int>(index)] = *c;
      }
    }
  }
  if (s.contains("limits")) {
    const json& limits = s["limits"];
    if (!limits.is_object()) {
      errors->push_back("memory.limits: expected an object such as {\"train-*\": \"8G\"}, got " +
                        shown(limits));
    } else {
      for (const auto& [pattern, value] : limits.items()) {
        auto bytes = parse_bytes(value);
        if (pattern.empty() || pattern.size() >= protocol::kJobNameSize || !bytes)
          errors->push_back("memory.limits." + pattern +
                            ": expected a job-name pattern of 1 to 63 characters and bytes, got " +
                            shown(value));
        else
          out->limits.push_back({pattern, *bytes});
      }
    }
  }
  if (s.contains("swap_timeout_ms")) {
    const json& v = s["swap_timeout_ms"];
    if (!v.is_number_integer() || v.get<int64_t>() < 100 || v.get<int64_t>() > 8000)
      errors->push_back("memory.swap_timeout_ms: expected an integer in [100, 8000], got " +
                        shown(v));
    else
      out->swap_timeout = std::chrono::milliseconds(v.get<int64_t>());
  }
  // Declarations checked against NVML (daemon/memory_audit.h): how often NVML is read (0: never),
  // and how long declared memory may exceed what the process holds before it stops counting.
  auto milliseconds = [&](const char* key, int64_t low, int64_t high, bool zero_allowed,
                          std::chrono::milliseconds* into) {
    if (!s.contains(key)) return;
    const json& v = s[key];
    bool in_range = v.is_number_integer() && v.get<int64_t>() >= low && v.get<int64_t>() <= high;
    if (!in_range && !(zero_allowed && v.is_number_integer() && v.get<int64_t>() == 0))
      errors->push_back(std::string("memory.") + key + ": expected " +
                        (zero_allowed ? "0 (off) or " : "") + "an integer in [" +
                        std::to_string(low) + ", " + std::to_string(high) + "], got " + shown(v));
    else
      *into = std::chrono::milliseconds(v.get<int64_t>());
  };
  milliseconds("nvml_sample_ms", 100, 60000, true, &out->nvml_sample);
  milliseconds("declaration_grace_ms", 500, 3600000, false, &out->declaration_grace);
  if (s.contains("trace")) {
    const json& v = s["trace"];
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>()[0] != '/' ||
        v.get<std::string>().size() > 4095)
      errors->push_back("memory.trace: expected an absolute file path, got " + shown(v));
    else
      out->trace_path = v.get<std::string>();
  }
  if (s.contains("rotation"))
    parse_rotation(s["rotation"], out->oversubscribe, &out->rotation, errors);
}

}  // namespace gpushare::daemon
