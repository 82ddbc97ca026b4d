// ferry::device_set: an engine per GPU on one executor. It enables peer access between every pair of its
// devices whose link supports it, tells what each link is, and runs a copy between two of its devices'
// memory on the engine of the destination's device:
//
//   asio::io_context io;
//   ferry::device_set gpus{io.get_executor()};            // every GPU; or {executor, {0, 1}}
//   auto a = gpus.allocate<float>(0, n), b = gpus.allocate<float>(1, n);
//   co_await gpus.copy_peer(a.get(), b.get(), n, asio::use_awaitable);
//
// With one GPU it is a set of one (copies between two contexts of it still route).
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/detail/peer_mesh.hpp"
#include "ferry/engine.hpp"

namespace ferry {

class device_set {
 public:
  using executor_type = boost::asio::any_io_executor;

  // One engine per device present (options.device is ignored: each engine gets its own device).
  explicit device_set(executor_type executor, engine_options options = {})
      : device_set(std::move(executor), detail::peer_mesh::every_device(), std::move(options)) {}
  // One engine for each listed ordinal. Throws std::invalid_argument for an empty list, an ordinal
  // outside [0, device::count()) or one listed twice (naming it), and what engine's constructor throws.
  device_set(executor_type executor, std::vector<int> ordinals, engine_options options = {})
      : mesh_(std::move(ordinals)) {
    for (int ordinal : mesh_.ordinals()) {
      options.device = ordinal;
      engines_.push_back(std::make_unique<engine>(executor, options));
    }
  }
  // The same for a braced list, device_set{executor, {0, 1}} (which would otherwise also read as an
  // engine_options).
  device_set(executor_type executor, std::initializer_list<int> ordinals, engine_options options = {})
      : device_set(std::move(executor), std::vector<int>(ordinals), std::move(options)) {}
  device_set(const device_set&) = delete;
  device_set& operator=(const device_set&) = delete;
  // The engines first (each waits for its work), then the peer access the set enabled is disabled.
  ~device_set() = default;

  std::size_t size() const noexcept { return engines_.size(); }
  const std::vector<int>& ordinals() const noexcept { return mesh_.ordinals(); }
  // The engine of device `ordinal`; std::invalid_argument when the set does not hold it.
  engine& at(int ordinal) { return *engines_[mesh_.index_of("device_set::at", ordinal)]; }
  // The link from device `from` to device `to` (two different devices of the set).
  device_link link(int from, int to) const { return mesh_.link(from, to); }

  template <storable T>
  device_buffer<T> allocate(int ordinal, std::size_t count) {
    return engines_[mesh_.index_of("device_set::allocate", ordinal)]->template allocate<T>(count);
  }

  // engine::copy_peer between memory of two of the set's devices (or two contexts of one), on the engine
  // of the destination's device: its copy engines write locally, and a peer_path::kernel copy runs
  // there, reading the source over the link. The contexts are those that own the allocations. Same
  // completion, cancellation and lifetime as engine::copy_peer; std::invalid_argument when a pointer
  // is not device memory of the set's devices, before anything is enqueued.
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy_peer(device_ptr<S> source, device_ptr<T> destination, std::size_t count, Token&& token) {
    return copy_peer(source, destination, count, transfer_options{}, std::forward<Token>(token));
  }
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy_peer(device_ptr<S> source, device_ptr<T> destination, std::size_t count, transfer_options options,
                 Token&& token) {
    const detail::peer_mesh::route to = mesh_.route_copy("device_set::copy_peer", source.get(), destination.get());
    return engines_[to.engine]->copy_peer(source, context_ref(to.source_context), destination,
                                          context_ref(to.destination_context), count, std::move(options),
                                          std::forward<Token>(token));
  }

 private:
  detail::peer_mesh mesh_;  // first in, last out: the engines use its contexts and peer access
  std::vector<std::unique_ptr<engine>> engines_;
};

}  // namespace ferry
