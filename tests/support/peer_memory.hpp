// Device memory of a given context for peer-copy tests: written with seeded random values at the source,
// poison at the destination, read back and freed with its owner current.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <span>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

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

// A peer copy on a gated stream, cancelled once it is on the stream: it completes only after the gate
// opens (the GPU owns both arrays until then), with operation_aborted, and every byte moved.
inline void check_cancel_after_enqueue(boost::asio::io_context& io, engine& gpu, peer_copy& copy,
                                       transfer_options options = {}) {
  namespace asio = boost::asio;
  {
    // A path's first use in a context may load ferry's kernels (cuModuleLoadData), which waits for the
    // context's work in flight: behind the closed gate below it would wait for ever. A copy first.
    peer_copy warm(copy.from, copy.to, copy.values.front(), copy.count);
    outcome warmed;
    warm.start(gpu, options, record(warmed));
    BOOST_TEST(run_until(io, [&] { return warmed.calls == 1; }));
  }
  stream s = stream::create();
  stream_gate gate(s);
  options.stream = stream_ref(s);
  outcome result;
  asio::cancellation_signal signal;
  copy.start(gpu, options, asio::bind_cancellation_slot(signal.slot(), record(result)));
  signal.emit(asio::cancellation_type::terminal);
  run_for_a_while(io, std::chrono::milliseconds(200));
  BOOST_TEST(result.calls == 0);
  gate.open();
  BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(result.error == asio::error::operation_aborted);
  BOOST_TEST(copy.landed());
}

// A peer copy queued behind a staged poke that holds its stream's queue (six chunks through an engine's
// only 64 KiB staging chunk, the first behind a closed gate), cancelled there: it gives up when its turn
// comes without submitting (operation_aborted, no bytes, the destination untouched), and the poke lands.
inline void check_cancel_before_enqueue(boost::asio::io_context& io, engine& gpu, peer_copy& copy,
                                        transfer_options options = {}) {
  namespace asio = boost::asio;
  const std::size_t poke_count = (64 << 10) / 4 * 6;
  auto poke_values = random_vector<std::uint32_t>(poke_count, copy.values.front());
  auto poke_destination = gpu.allocate<std::uint32_t>(poke_count);
  stream s = stream::create();
  stream_gate gate(s);
  outcome poke_result, copy_result;
  gpu.poke(std::span<const std::uint32_t>(poke_values), poke_destination.get(), {s, transfer_plan::staged},
           record(poke_result));
  options.stream = stream_ref(s);
  asio::cancellation_signal signal;
  copy.start(gpu, options, asio::bind_cancellation_slot(signal.slot(), record(copy_result)));
  signal.emit(asio::cancellation_type::terminal);
  run_for_a_while(io);
  BOOST_TEST(poke_result.calls + copy_result.calls == 0);
  gate.open();
  BOOST_TEST(run_until(io, [&] { return poke_result.calls == 1 && copy_result.calls == 1; }));
  BOOST_TEST(copy_result.error == asio::error::operation_aborted);
  BOOST_TEST(copy_result.bytes == 0u);
  BOOST_TEST(!poke_result.error);
  BOOST_TEST(same_bytes(peek_list_array(poke_count, poke_destination.get()), poke_values));
  BOOST_TEST(copy.untouched());
}

}  // namespace ferry::testing
