// Memory for what every engine op allocates: the operation that holds its handler (engine_initiation.hpp)
// and the delivery of its completion (pending_handlers.hpp). Such an object is made on the thread that
// starts the op and freed on another (the thread that runs the handler, or the poller's). The
// general-purpose allocator hands a block freed on another thread back to that thread's arena, under
// the arena's lock, while the starting thread takes a fresh one from its own; a thread that starts ops
// without running an io_context (a request thread, a use_future caller) paid that on every op. Here the
// blocks of a few size classes are reused by any thread through a lock-free stack, so that taking one
// and giving it back costs an atomic exchange each, whatever threads do it.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>

namespace ferry::detail::op_blocks {

// A block of at least `bytes` bytes, aligned for any standard type: a reused one of the smallest size
// class that holds it while one is free, else from operator new. Throws std::bad_alloc.
void* take(std::size_t bytes);
// Gives back a block that take(bytes) returned, with the same `bytes`; on any thread.
void give_back(void* block, std::size_t bytes) noexcept;
// False in a build under AddressSanitizer, where every block comes from operator new (so that its leak
// and use-after-free checks see each op).
bool reuses_blocks() noexcept;

// An allocator over take() and give_back() (for std::allocate_shared). Types aligned beyond the standard
// types' alignment go to std::allocator.
template <class T>
struct allocator {
  using value_type = T;

  allocator() noexcept = default;
  template <class U>
  allocator(const allocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    if constexpr (alignof(T) > alignof(std::max_align_t)) {
      return std::allocator<T>().allocate(count);
    } else {
      if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
      return static_cast<T*>(take(count * sizeof(T)));
    }
  }
  void deallocate(T* block, std::size_t count) noexcept {
    if constexpr (alignof(T) > alignof(std::max_align_t)) {
      std::allocator<T>().deallocate(block, count);
    } else {
      give_back(block, count * sizeof(T));
    }
  }

  template <class U>
  friend bool operator==(const allocator&, const allocator<U>&) noexcept {
    return true;
  }
};

}  // namespace ferry::detail::op_blocks
