// Asking the cache for memory about to be read or written, ahead of the access.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::detail {

// Asks the cache for each 64-byte line that [object, object + bytes) touches. On x86-64 an asm
// statement: GCC emits PREFETCHW for __builtin_prefetch only when built for a CPU named to have it, and
// it dropped a loop of read prefetches as code without effect.
template <bool for_write>
void prefetch_lines(const void* object, std::size_t bytes) noexcept {
  if (bytes == 0) return;
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(object) + bytes;
  for (std::uintptr_t line = reinterpret_cast<std::uintptr_t>(object) & ~std::uintptr_t{63}; line < end;
       line += 64) {
    const char* at = reinterpret_cast<const char*>(line);
#if defined(__x86_64__)
    if constexpr (for_write) {
      asm volatile("prefetchw %0" : : "m"(*at));
    } else {
      asm volatile("prefetcht0 %0" : : "m"(*at));
    }
#else
    __builtin_prefetch(at, for_write ? 1 : 0);
#endif
  }
}

// For writing. On x86-64 that is PREFETCHW, which takes a line another core holds exclusive at once,
// where a plain prefetch brings it shared and the write after it goes back to the other core a second
// time.
inline void prefetch_for_write(const void* object, std::size_t bytes) noexcept {
  prefetch_lines<true>(object, bytes);
}

// For reading.
inline void prefetch_for_reading(const void* object, std::size_t bytes) noexcept {
  prefetch_lines<false>(object, bytes);
}

}  // namespace ferry::detail
