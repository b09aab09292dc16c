// Reading the simulator's JSON inputs (traces, memory cases) field by field.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

namespace gpushare::sim {

// Reads fields of one JSON object, refusing unknown keys (a misspelt key would silently be a
// default otherwise) and values of the wrong type or range.
class Fields {
 public:
  using json = nlohmann::json;

  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) error_ = where_ + " is not a JSON object";
  }

  // A non-negative number scaled to an integer (e.g. seconds to ns).
  void number(const char* key, uint64_t& out, double scale) {
    double value = 0;
    if (!real(key, value)) return;
    if (value < 0 || value * scale > 1e18) {
      fail(key, "must be between 0 and " + std::to_string(1e18 / scale));
      return;
    }
    out = static_cast<uint64_t>(std::llround(value * scale));
  }
  void number(const char* key, uint32_t& out) {
    uint64_t wide = out;
    number(key, wide, 1);
    if (wide > std::numeric_limits<uint32_t>::max()) return fail(key, "is too large");
    out = static_cast<uint32_t>(wide);
  }
  bool real(const char* key, double& out) {
    seen_.insert(key);
    if (!object_.contains(key)) return false;
    if (!object_[key].is_number()) {
      fail(key, "must be a number");
      return false;
    }
    out = object_[key].get<double>();
    return true;
  }
  void flag(const char* key, bool& out) {
    seen_.insert(key);
    if (!object_.contains(key)) return;
    if (!object_[key].is_boolean()) return fail(key, "must be true or false");
    out = object_[key].get<bool>();
  }
  void text(const char* key, std::string& out) {
    seen_.insert(key);
    if (!object_.contains(key)) return;
    if (!object_[key].is_string()) return fail(key, "must be a string");
    out = object_[key].get<std::string>();
  }
  const json* list(const char* key) {
    seen_.insert(key);
    if (!object_.contains(key)) return nullptr;
    if (!object_[key].is_array()) {
      fail(key, "must be a list");
      return nullptr;
    }
    return &object_[key];
  }
  void fail(const char* key, const std::string& why) {
    if (error_.empty()) error_ = where_ + " field '" + key + "' " + why;
  }
  // Call after every field was read.
  std::string finish() {
    if (error_.empty() && object_.is_object())
      for (const auto& [key, value] : object_.items())
        if (!seen_.count(key)) return where_ + " has an unknown field '" + key + "'";
    return error_;
  }

 private:
  const json& object_;
  std::string where_;
  std::string error_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace gpushare::sim
