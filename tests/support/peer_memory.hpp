// Device memory of a given context for peer-copy tests: written with seeded random values at the source,
// poison at the destination, read back and freed with its owner current.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/random_bytes.hpp"

namespace ferry::testing {

// Device memory of `owner`, written with `content`, read and freed with `owner` current.
class memory_in {
 public:
  memory_in(context_ref owner, const std::vector<std::uint32_t>& content) : owner_(owner) {
    context_guard in_owner(owner_);
    memory_.emplace(device_buffer<std::uint32_t>::allocate(content.size()));
    poke_array(content.size(), content.data(), memory_->get());
  }
  memory_in(const memory_in&) = delete;
  memory_in& operator=(const memory_in&) = delete;
  ~memory_in() {
    context_guard in_owner(owner_);
    memory_.reset();
  }
  device_ptr<std::uint32_t> get() const { return memory_->get(); }
  std::vector<std::uint32_t> read() const {
    context_guard in_owner(owner_);
    return peek_list_array(memory_->size(), memory_->get());
  }

 private:
  context_ref owner_;
  std::optional<device_buffer<std::uint32_t>> memory_;
};

// A copy of `count` values from one context to another: random values at the source, poison at the
// destination.
struct peer_copy {
  static constexpr std::uint32_t poison = 0xA5A5A5A5u;

  peer_copy(context_ref from, context_ref to, std::uint64_t seed, std::size_t count)
      : from(from), to(to), count(count), values(random_vector<std::uint32_t>(count, seed)), source(from, values),
        destination(to, std::vector<std::uint32_t>(count, poison)) {}

  // engine::copy_peer of the whole array, with `rest` (optional transfer_options, then the token).
  template <class... Rest>
  auto start(engine& gpu, Rest&&... rest) {
    return gpu.copy_peer(device_ptr<const std::uint32_t>(source.get()), from, destination.get(), to, count,
                         std::forward<Rest>(rest)...);
  }
  bool landed() const { return same_bytes(destination.read(), values); }
  bool untouched() const { return same_bytes(destination.read(), std::vector<std::uint32_t>(count, poison)); }

  context_ref from, to;
  std::size_t count;
  std::vector<std::uint32_t> values;
  memory_in source, destination;
};

}  // namespace ferry::testing
