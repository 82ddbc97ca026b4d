// The reused blocks of ferry/detail/op_blocks.hpp: per size class, one array of blocks made on first use
// and never freed (an op may be freed during static destruction, after the engine that made it), whose
// free members are kept in a free_indices stack (none under AddressSanitizer: reuses_blocks()).
#include "ferry/detail/op_blocks.hpp"

#include <array>
#include <cstdint>

#include "engine/async/free_indices.hpp"

namespace ferry::detail::op_blocks {
namespace {

// g++ says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool reuse_blocks = false;
#elif defined(__has_feature)
constexpr bool reuse_blocks = !__has_feature(address_sanitizer);
#else
constexpr bool reuse_blocks = true;
#endif

// An op with a coroutine's or a lambda's handler takes a few hundred bytes; the largest class holds
// handlers that carry more of their own state. Blocks are whole cache lines, so that two ops freed on
// different threads never share one.
constexpr std::array<std::size_t, 4> class_bytes{128, 256, 512, 1024};
// Per class: as many ops in flight at once as a burst of small copies makes; ops beyond them are
// allocated as usual.
constexpr std::uint32_t blocks_per_class = 4096;
constexpr std::align_val_t block_alignment{64};

class block_class {
 public:
  explicit block_class(std::size_t bytes)
      : bytes_(bytes),
        memory_(static_cast<std::byte*>(::operator new(bytes * blocks_per_class, block_alignment))),
        free_(blocks_per_class) {}

  // A free block, or null when every one is taken.
  void* take() noexcept {
    const std::uint32_t index = free_.pop();
    return index == free_indices::none ? nullptr : memory_ + std::size_t{index} * bytes_;
  }
  // False when `block` is not one of this class's.
  bool give_back(void* block) noexcept {
    auto* at = static_cast<std::byte*>(block);
    if (at < memory_ || at >= memory_ + bytes_ * blocks_per_class) return false;
    free_.push(static_cast<std::uint32_t>((at - memory_) / bytes_));
    return true;
  }

 private:
  std::size_t bytes_;
  std::byte* memory_;  // never freed (see the top of this file)
  free_indices free_;
};

// The class for `bytes`, or null when no class holds it. The classes are made by the first op (their
// arrays' pages are touched as their blocks are first used).
block_class* class_for(std::size_t bytes) {
  static const std::array<block_class*, class_bytes.size()> classes = [] {
    std::array<block_class*, class_bytes.size()> made{};
    for (std::size_t i = 0; i < class_bytes.size(); ++i) made[i] = new block_class(class_bytes[i]);
    return made;
  }();
  for (std::size_t i = 0; i < class_bytes.size(); ++i) {
    if (bytes <= class_bytes[i]) return classes[i];
  }
  return nullptr;
}

}  // namespace

bool reuses_blocks() noexcept { return reuse_blocks; }

void* take(std::size_t bytes) {
  if (reuse_blocks) {
    if (block_class* blocks = class_for(bytes)) {
      if (void* block = blocks->take()) return block;
    }
  }
  return ::operator new(bytes);
}

void give_back(void* block, std::size_t bytes) noexcept {
  if (reuse_blocks) {
    if (block_class* blocks = class_for(bytes); blocks != nullptr && blocks->give_back(block)) return;
  }
  ::operator delete(block);  // unsized: clang leaves sized deallocation off by default
}

}  // namespace ferry::detail::op_blocks
