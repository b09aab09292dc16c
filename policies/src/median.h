// The median of a few recent samples: what the policies take as a robust level (a solo rate, a
// launch rate, production's busy share), not moved by one sample far off.
#pragma once

#include <algorithm>
#include <iterator>
#include <vector>

namespace gpushare::policies {

// The median of [first, last): the mean of the middle two for an even count, 0 for none. Pure.
template <typename Iterator>
double median(Iterator first, Iterator last) {
  std::vector<double> sorted(first, last);
  if (sorted.empty()) return 0;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

}  // namespace gpushare::policies
