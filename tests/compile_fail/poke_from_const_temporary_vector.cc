// A const temporary vector cannot be owned and handed back, and must not be left dangling: rejected.
// expect-error: const temporary vector
#include <boost/asio/io_context.hpp>

#include <vector>

#include "ferry/engine.hpp"

void misuse(ferry::engine& gpu, ferry::device_ptr<int> destination) {
  const auto make = [] { return std::vector<int>(16); };
  using constant = const std::vector<int>;
  gpu.poke(static_cast<constant&&>(make()), destination, [](auto...) {});
}
