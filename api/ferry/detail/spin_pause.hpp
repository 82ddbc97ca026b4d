// A spin-wait's pause, for every spin in ferry: it tells the core that a thread is spinning, so that
// the other hardware thread of the core runs freely and the spinning one draws less power.
#pragma once

namespace ferry::detail {

inline void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace ferry::detail
