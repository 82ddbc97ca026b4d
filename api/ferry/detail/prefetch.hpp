// Asking the cache for memory about to be written, ahead of the write.
#pragma once

#include <cstddef>

namespace ferry::detail {

// Asks the cache for the lines of [object, object + bytes), for writing. On x86-64 that is PREFETCHW,
// which takes a line another core holds exclusive at once, where a plain prefetch brings it shared and the
// write after it goes back to the other core a second time. (GCC emits PREFETCHW for __builtin_prefetch
// only when built for a CPU named to have it.)
inline void prefetch_for_write(const void* object, std::size_t bytes) noexcept {
  const char* first = static_cast<const char*>(object);
  for (std::size_t offset = 0; offset < bytes; offset += 64) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(first[offset]));
#else
    __builtin_prefetch(first + offset, 1);
#endif
  }
}

}  // namespace ferry::detail
