// ferry::block_pair: one block of a block list (engine::poke_blocks, engine::peek_blocks): host memory
// and the device memory it goes to or comes from, host.size() elements. Many small pieces (KV-cache
// blocks, parameters, a batch's rows) then move in one operation with one completion, instead of one
// driver call each.
//
//   std::vector<ferry::block_pair<ferry::pinned_span<const float>, float>> blocks;
//   for (std::size_t i = 0; i < n; ++i) blocks.push_back({staging.subspan(i * 1024, 1024), cache.get() + slot[i] * 1024});
//   co_await gpu.poke_blocks(blocks, asio::use_awaitable);
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include "ferry/pointers.hpp"
#include "ferry/views.hpp"

namespace ferry {

// Host is pinned_span<U> (page-locked: the device reads or writes it in place) or anything that is a
// std::span<U> (pageable: packed through the engine's page-locked staging), U being T or const T.
template <class Host, storable T>
struct block_pair {
  using host_type = Host;
  using element_type = T;

  Host host;
  device_ptr<T> device;
};

template <class Host, storable T>
block_pair(Host, device_ptr<T>) -> block_pair<Host, T>;

}  // namespace ferry
