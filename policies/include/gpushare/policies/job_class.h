// The words every part of gpushare shares: a job's class and "no limit". Defined once, here in
// the pure layer; the wire (protocol/) carries the same values, so they are fixed numbers.
#pragma once

#include <cstdint>

namespace gpushare::policies {

enum class JobClass : uint32_t { production = 0, opportunistic = 1 };

inline constexpr uint64_t kUnlimited = ~uint64_t{0};

}  // namespace gpushare::policies
