// The cost of one cheap call: timed in rounds of many calls, since one call is shorter than the clock's
// resolution allows to time alone.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "bench/harness/statistics.hpp"

namespace ferry::bench {

// Median over `rounds` rounds of body(0) ... body(calls - 1), in microseconds per call, less the first
// `warm_up_rounds`; `after_round` (untimed) runs after each round, e.g. to drain the stream.
inline double per_call_us(int calls, int rounds, int warm_up_rounds, const std::function<void(int)>& body,
                          const std::function<void()>& after_round) {
  std::vector<double> timed;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body(i);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    after_round();
    if (round >= warm_up_rounds) timed.push_back(seconds * 1e6 / calls);
  }
  return median(timed);
}

}  // namespace ferry::bench
