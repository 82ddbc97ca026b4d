// A temporary std::array would be destroyed at the end of the call, before the GPU reads it: rejected.
// expect-error: would dangle
#include <array>

#include "ferry/engine.hpp"

void misuse(ferry::engine& gpu, ferry::device_ptr<int> destination) {
  gpu.poke(std::array<int, 16>{}, destination, [](auto...) {});
}
