// A count of the contexts ferry has destroyed and the holds on primary contexts it has released. A
// context that goes away takes its memory with it, without a free of each allocation: what remembers
// allocations (engine/memory/own_ranges) rechecks them once this count has moved.
#pragma once

#include <cstdint>

namespace ferry::detail {

// After cuCtxDestroy or cuDevicePrimaryCtxRelease.
void note_context_released() noexcept;

std::uint64_t contexts_released() noexcept;

}  // namespace ferry::detail
