// Order statistics of benchmark samples (copies taken: the callers keep their samples in order).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ferry::bench {

// The middle value; for an even count, the mean of the two middle ones.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The value at fraction p of the sorted samples (nearest rank at or below p * (count - 1)).
inline double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(p * (values.size() - 1))];
}

}  // namespace ferry::bench
