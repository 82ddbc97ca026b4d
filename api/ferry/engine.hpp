// ferry::engine: asynchronous transfers that take any Boost.Asio completion token (use_awaitable,
// deferred, use_future, a callback, as_tuple(...)). Work goes onto CUDA streams; a completion bridge
// learns when the GPU is done and hands the handler to its associated executor.
//
//   asio::io_context io;
//   ferry::engine gpu{io.get_executor()};
//   asio::co_spawn(io, [&]() -> asio::awaitable<void> {
//     std::vector<float> host(1 << 24, 1.0f);
//     auto dev = gpu.allocate<float>(host.size());
//     co_await gpu.poke(host, dev.get(), asio::use_awaitable);         // borrowed until it completes
//     co_await gpu.memset(dev.get(), host.size(), 0.0f, asio::use_awaitable);
//     co_await gpu.peek(ferry::device_ptr<const float>(dev.get()), host, asio::use_awaitable);
//   }, asio::detached);
//   io.run();
//
// Common to every operation below (Asio's headings):
// - Completion signature: void(boost::system::error_code, std::size_t bytes) unless stated otherwise.
//   CUDA statuses arrive as codes of ferry::cuda_category() (they compare equal to
//   ferry::make_error_code(status)); a cancelled op completes with asio::error::operation_aborted.
//   use_awaitable throws them as boost::system::system_error, as Asio does. Argument errors are
//   std::invalid_argument, thrown by the initiating function itself, before anything is enqueued.
//   engine_options::on_failure receives each failure with its operation, stream, device and byte range.
// - Per-operation cancellation: terminal and partial. Work not yet on a stream is not submitted; work
//   already on a stream cannot be aborted, so the op completes with operation_aborted only after the
//   GPU is done with every byte of the caller's memory. Total cancellation is not supported (a
//   submitted transfer cannot be undone).
// - Lifetime of arguments: host memory passed by span or host_ptr, and device memory, must stay valid
//   until the handler runs. A std::vector passed by rvalue is owned by the op and handed back in the
//   completion (signature void(error_code, std::vector<T>)). Other rvalue containers do not compile.
// - Which thread runs the handler: a thread running the handler's associated executor (the engine's
//   executor when the handler has none), through asio::post, or, for an io_context's own executor, run
//   by the engine's keep-awake task on one of its threads (README, "Keeping the handler's io_context
//   awake"); never the initiating thread inside the initiating call, never an engine thread. Work is
//   tracked on the engine's executor and on the handler's until the handler has run.
// - Memory: an op's state comes from the global allocator, not the handler's associated allocator; the
//   engine holds it until the GPU is done with the op's memory, which can be after the handler has run
//   (Asio asks that associated-allocator memory be freed before the handler is invoked).
// - Ordering: ops given the same stream_ref run in submission order; ops given none run on pool streams
//   and may overlap. order(first, then) makes later work on `then` wait for work on `first` (an event,
//   never a host wait); wait_all completes when everything submitted before it is done.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/detail/engine_core.hpp"
#include "ferry/detail/handler_completion.hpp"
#include "ferry/detail/stage_trace.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/engine_options.hpp"
#include "ferry/error.hpp"
#include "ferry/managed.hpp"
#include "ferry/pointers.hpp"
#include "ferry/stream.hpp"

namespace ferry {

using transfer_signature = void(boost::system::error_code, std::size_t);

// Per-call choices for a pageable transfer: the stream (none: a pool stream) and a forced plan.
struct transfer_options {
  std::optional<stream_ref> stream = std::nullopt;
  transfer_plan plan = transfer_plan::automatic;
  std::optional<CUstream> stream_handle() const {
    return stream ? std::optional<CUstream>(stream->get()) : std::nullopt;
  }
};
using status_signature = void(boost::system::error_code);

class engine {
 public:
  using executor_type = boost::asio::any_io_executor;

  // Binds the engine to `executor` (the default for handlers without one) and to the primary context of
  // options.device. Throws std::invalid_argument for bad options, cuda_error when the device is unusable.
  //
  // The engine must not outlive the execution context (io_context) of `executor`: destroy the engine
  // first. An op started after that context has shut down throws std::logic_error and starts nothing.
  explicit engine(executor_type executor, engine_options options = {})
      : executor_(std::move(executor)),
        executor_registry_(detail::registry_of(detail::context_of(executor_))),
        core_(std::make_shared<detail::engine_core>(options)) {}

  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;
  // Waits for the GPU work of every op (caller and staging memory are then free), posts their
  // completions, and releases streams, events and staging. Handlers whose io_context is gone were
  // destroyed with it.
  ~engine() = default;

  executor_type get_executor() const noexcept { return executor_; }
  context_ref context() const noexcept { return context_ref(core_->context()); }
  int device_ordinal() const noexcept { return core_->device_ordinal(); }

  // Device memory in the engine's context.
  template <storable T>
  device_buffer<T> allocate(std::size_t count) {
    context_guard in_engine(context());
    return device_buffer<T>::allocate(count);
  }

  // ---- poke: host to device
  //
  // Completion signature: void(error_code, std::size_t bytes) (void(error_code, std::vector<T>) for the
  //   rvalue-vector forms). Per-operation cancellation: terminal, partial; a staged or registered poke stops
  //   between chunks and reports the bytes moved. Lifetime of arguments: the host memory and the device
  //   memory until the handler runs (an rvalue vector is the op's). Which thread runs the handler: one
  //   running the handler's associated executor (the engine's by default), never inside this call.
  //
  // From pageable memory: pinned, registered or staged as the planner decides (see transfer_plan).
  template <storable T, class Token>
  auto poke(std::span<const T> source, device_ptr<T> destination, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::poke", source.size(), sizeof(T),
                                              detail::pageable_side("source", source.data()),
                                              detail::device_side("destination", destination.get())),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto poke(std::span<const T> source, device_ptr<T> destination, stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::poke", source.size(), sizeof(T),
                                              detail::pageable_side("source", source.data()),
                                              detail::device_side("destination", destination.get())),
                          stream.get(), std::forward<Token>(token));
  }
  // With a forced plan (and optionally a stream): transfer_options{.stream = s, .plan = transfer_plan::staged}.
  template <storable T, class Token>
  auto poke(std::span<const T> source, device_ptr<T> destination, transfer_options options, Token&& token) {
    auto transfer = core_->prepare_copy("engine::poke", source.size(), sizeof(T),
                                        detail::pageable_side("source", source.data()),
                                        detail::device_side("destination", destination.get()));
    detail::force_plan(transfer, options.plan);
    return start_transfer(std::move(transfer), options.stream_handle(), std::forward<Token>(token));
  }
  // From page-locked memory: one DMA, no staging.
  template <storable T, class Token>
  auto poke(host_ptr<const T> source, std::size_t count, device_ptr<T> destination, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::poke", count, sizeof(T), detail::pinned_side("source", source.get()),
                                              detail::device_side("destination", destination.get())),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto poke(host_ptr<const T> source, std::size_t count, device_ptr<T> destination, stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::poke", count, sizeof(T), detail::pinned_side("source", source.get()),
                                              detail::device_side("destination", destination.get())),
                          stream.get(), std::forward<Token>(token));
  }
  // From a vector the op owns until the GPU is done with it; it comes back in the completion:
  // void(error_code, std::vector<T>).
  template <storable T, class Token>
  auto poke(std::vector<T>&& source, device_ptr<T> destination, Token&& token) {
    auto owned = std::make_shared<std::vector<T>>(std::move(source));
    auto transfer = core_->prepare_copy("engine::poke", owned->size(), sizeof(T),
                                        detail::pageable_side("source", owned->data()),
                                        detail::device_side("destination", destination.get()));
    return start_owning(std::move(transfer), std::nullopt, std::move(owned), std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto poke(std::vector<T>&& source, device_ptr<T> destination, stream_ref stream, Token&& token) {
    auto owned = std::make_shared<std::vector<T>>(std::move(source));
    auto transfer = core_->prepare_copy("engine::poke", owned->size(), sizeof(T),
                                        detail::pageable_side("source", owned->data()),
                                        detail::device_side("destination", destination.get()));
    return start_owning(std::move(transfer), stream.get(), std::move(owned), std::forward<Token>(token));
  }
  // A vector the caller keeps (an lvalue) is borrowed, as a span of it would be.
  template <storable T, class Token>
  auto poke(const std::vector<T>& source, device_ptr<T> destination, Token&& token) {
    return poke(std::span<const T>(source), destination, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto poke(const std::vector<T>& source, device_ptr<T> destination, stream_ref stream, Token&& token) {
    return poke(std::span<const T>(source), destination, stream, std::forward<Token>(token));
  }
  // A const temporary cannot be handed back: rejected at compile time rather than left dangling.
  template <storable T, class Token>
  auto poke(const std::vector<T>&& source, device_ptr<T> destination, Token&& token) = delete;
  template <storable T, class Token>
  auto poke(const std::vector<T>&& source, device_ptr<T> destination, stream_ref stream, Token&& token) = delete;

  // ---- peek: device to host
  //
  // Completion signature: void(error_code, std::size_t bytes), or void(error_code, std::vector<T>) for
  //   peek(source, count, token). Per-operation cancellation: terminal, partial (a staged peek stops between
  //   chunks; what arrived is reported in bytes). Lifetime of arguments: source and destination until the
  //   handler runs. Which thread runs the handler: one running its associated executor.

  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::span<std::remove_const_t<T>> destination, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::peek", destination.size(), sizeof(T),
                                              detail::device_side("source", source.get()),
                                              detail::pageable_side("destination", destination.data())),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::span<std::remove_const_t<T>> destination, stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::peek", destination.size(), sizeof(T),
                                              detail::device_side("source", source.get()),
                                              detail::pageable_side("destination", destination.data())),
                          stream.get(), std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::span<std::remove_const_t<T>> destination, transfer_options options,
            Token&& token) {
    auto transfer = core_->prepare_copy("engine::peek", destination.size(), sizeof(T),
                                        detail::device_side("source", source.get()),
                                        detail::pageable_side("destination", destination.data()));
    detail::force_plan(transfer, options.plan);
    return start_transfer(std::move(transfer), options.stream_handle(), std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, host_ptr<std::remove_const_t<T>> destination, std::size_t count, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::peek", count, sizeof(T), detail::device_side("source", source.get()),
                                              detail::pinned_side("destination", destination.get())),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, host_ptr<std::remove_const_t<T>> destination, std::size_t count,
            stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::peek", count, sizeof(T), detail::device_side("source", source.get()),
                                              detail::pinned_side("destination", destination.get())),
                          stream.get(), std::forward<Token>(token));
  }
  // Into a vector the caller keeps (borrowed until the handler runs; its size is the count).
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::vector<std::remove_const_t<T>>& destination, Token&& token) {
    return peek(source, std::span<std::remove_const_t<T>>(destination), std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::vector<std::remove_const_t<T>>& destination, stream_ref stream,
            Token&& token) {
    return peek(source, std::span<std::remove_const_t<T>>(destination), stream, std::forward<Token>(token));
  }
  // Into a new vector of `count` elements, handed over in the completion: void(error_code, std::vector<T>).
  // The source range is checked before the vector is made (a bad count never costs host memory).
  template <storable T, class Token>
  auto peek(device_ptr<const T> source, std::size_t count, Token&& token) {
    core_->check_device_range("engine::peek", count, sizeof(T), detail::device_side("source", source.get()));
    auto owned = std::make_shared<std::vector<std::remove_const_t<T>>>(count);
    auto transfer = core_->prepare_copy("engine::peek", count, sizeof(T), detail::device_side("source", source.get()),
                                        detail::pageable_side("destination", owned->data()));
    return start_owning(std::move(transfer), std::nullopt, std::move(owned), std::forward<Token>(token));
  }

  // ---- copy: device to device (same context), 2-D forms, and between contexts or devices
  //
  // Completion signature: void(error_code, std::size_t bytes). Per-operation cancellation: terminal,
  //   partial (only work not yet on a stream is dropped; otherwise operation_aborted once the GPU is done).
  //   Lifetime of arguments: both arrays until the handler runs. Which thread runs the handler: one running
  //   its associated executor. Small copies given no stream may be batched (transfer_plan::batched).

  template <storable T, class Token>
  auto copy(device_ptr<const T> source, device_ptr<std::remove_const_t<T>> destination, std::size_t count, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::copy", count, sizeof(T), detail::device_side("source", source.get()),
                                              detail::device_side("destination", destination.get())),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto copy(device_ptr<const T> source, device_ptr<std::remove_const_t<T>> destination, std::size_t count,
            stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy("engine::copy", count, sizeof(T), detail::device_side("source", source.get()),
                                              detail::device_side("destination", destination.get())),
                          stream.get(), std::forward<Token>(token));
  }

  // A width x height region (elements) at (x, y) of arrays whose rows are `width`s apart, as
  // peek_array_2d. Either side may be device memory or page-locked host memory (host_ptr), both sides too.
  template <class Source, class Destination, class Token>
  auto copy_2d(std::size_t width, std::size_t height, Source source, std::size_t source_width, std::size_t source_x,
               std::size_t source_y, Destination destination, std::size_t destination_width, std::size_t destination_x,
               std::size_t destination_y, stream_ref stream, Token&& token) {
    static_assert(sizeof(typename Source::element_type) == sizeof(typename Destination::element_type));
    return start_transfer(
        core_->prepare_copy_2d("engine::copy_2d", width, height, sizeof(typename Source::element_type),
                               side_of("source", source), {source_width, source_x, source_y},
                               side_of("destination", destination), {destination_width, destination_x, destination_y}),
        stream.get(), std::forward<Token>(token));
  }

  template <storable T, class Token>
  auto copy_peer(device_ptr<const T> source, context_ref source_context, device_ptr<std::remove_const_t<T>> destination,
                 context_ref destination_context, std::size_t count, Token&& token) {
    return start_transfer(core_->prepare_copy_peer("engine::copy_peer", count, sizeof(T), source.get(), source_context.get(),
                                                   destination.get(), destination_context.get()),
                          std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto copy_peer(device_ptr<const T> source, context_ref source_context, device_ptr<std::remove_const_t<T>> destination,
                 context_ref destination_context, std::size_t count, stream_ref stream, Token&& token) {
    return start_transfer(core_->prepare_copy_peer("engine::copy_peer", count, sizeof(T), source.get(), source_context.get(),
                                                   destination.get(), destination_context.get()),
                          stream.get(), std::forward<Token>(token));
  }

  // ---- memset (elements of 1, 2, 4, 8 or 16 bytes) and managed prefetch
  //
  // Completion signature: void(error_code). Per-operation cancellation: terminal, partial (as copy).
  //   Lifetime of arguments: the memory until the handler runs; `value` is copied at the call. Which thread
  //   runs the handler: one running its associated executor.

  template <storable T, class Token>
  auto memset(device_ptr<T> destination, std::size_t count, const T& value, Token&& token) {
    return start_status(core_->prepare_fill("engine::memset", destination.get(), count, sizeof(T), &value),
                        std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto memset(device_ptr<T> destination, std::size_t count, const T& value, stream_ref stream, Token&& token) {
    return start_status(core_->prepare_fill("engine::memset", destination.get(), count, sizeof(T), &value),
                        stream.get(), std::forward<Token>(token));
  }

  template <storable T, class Token>
  auto prefetch(device_ptr<T> managed, std::size_t count, memory_location location, Token&& token) {
    return start_status(core_->prepare_prefetch("engine::prefetch", managed.get(), count, sizeof(T), location.to_driver()),
                        std::nullopt, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto prefetch(device_ptr<T> managed, std::size_t count, memory_location location, stream_ref stream, Token&& token) {
    return start_status(core_->prepare_prefetch("engine::prefetch", managed.get(), count, sizeof(T), location.to_driver()),
                        stream.get(), std::forward<Token>(token));
  }

  // ---- ordering

  // Completes (void(error_code)) when every op submitted before it has completed: with success, or with
  // the sticky error once the context has failed (sticky_error()). Not cancellable.
  template <class Token>
  auto wait_all(Token&& token) {
    return boost::asio::async_initiate<Token, status_signature>(
        initiation{executor_,
                   [this](auto handler) {
                     check_executor_alive();
                     auto op = make_operation(std::move(handler), deliver_status{});
                     core_->wait_all(std::move(op));
                   }},
        token);
  }

  // Later work on `then` waits for the work on `first` so far (staged transfers included); the host
  // does not wait. A failure of the driver calls behind it goes to engine_options::on_failure.
  void order(stream_ref first, stream_ref then) { core_->order(first.get(), then.get()); }

  // Tells the engine that the pageable memory [address, address + bytes) is about to be freed (or
  // reallocated): registrations the engine cached for it are dropped. Without this, a new buffer later
  // allocated at the same addresses would be transferred through the old buffer's pinned pages.
  void forget_host_memory(const void* address, std::size_t bytes) { core_->forget_host_memory(address, bytes); }
  template <class T>
  void forget_host_memory(std::span<T> memory) { forget_host_memory(memory.data(), memory.size_bytes()); }

  // How many transfers each plan took so far (the planner's metric).
  ferry::plan_counts plan_counts() const noexcept { return core_->counts(); }

  // The sticky error that poisoned the engine's context, if any: submits after it fail fast with it.
  std::error_code sticky_error() const noexcept { return core_->sticky_error(); }

  // CPU seconds used by the engine's completion poller (for measuring its idle cost).
  double poller_cpu_seconds() const { return core_->poller_cpu_seconds(); }

  // Bytes of page-locked host memory the engine holds (staging pool and cached registrations), for
  // watching that it stays bounded.
  std::size_t pinned_bytes() const { return core_->pinned_bytes(); }

 private:
  struct deliver_bytes {
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, std::size_t bytes) {
      std::move(handler)(error, bytes);
    }
  };
  struct deliver_status {
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, std::size_t) {
      std::move(handler)(error);
    }
  };
  template <class Vector>
  struct deliver_vector {
    std::shared_ptr<Vector> owned;
    template <class Handler>
    void operator()(Handler&& handler, boost::system::error_code error, std::size_t) {
      std::move(handler)(error, std::move(*owned));
    }
  };

  // What async_initiate is given: the launch of an op, naming the engine's executor as its associated
  // executor, as the initiations of Asio's I/O objects do. Tokens that take their executor from the
  // initiation (experimental::use_promise) then resume on the engine's executor, not a system thread.
  template <class Launch>
  struct initiation {
    using executor_type = engine::executor_type;
    initiation(executor_type executor, Launch launch) : executor(std::move(executor)), launch(std::move(launch)) {}
    executor_type executor;
    Launch launch;
    executor_type get_executor() const noexcept { return executor; }
    template <class Handler, class... Arguments>
    void operator()(Handler&& handler, Arguments&&... arguments) {
      launch(std::forward<Handler>(handler), std::forward<Arguments>(arguments)...);
    }
  };

  template <class T>
  static detail::endpoint side_of(std::string_view argument, device_ptr<T> pointer) {
    return detail::device_side(argument, pointer.get());
  }
  template <class T>
  static detail::endpoint side_of(std::string_view argument, host_ptr<T> pointer) {
    return detail::pinned_side(argument, pointer.get());
  }

  template <class Handler, class Deliver>
  std::shared_ptr<detail::operation> make_operation(Handler handler, Deliver deliver) {
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<detail::operation>(
        std::make_unique<detail::handler_completion<Handler, Deliver>>(std::move(handler), executor_, std::move(deliver),
                                                                       core_->executor_spin()));
    if (slot.is_connected()) {
      slot.assign([weak_op = std::weak_ptr(op), weak_core = std::weak_ptr(core_)](boost::asio::cancellation_type type) {
        if ((type & (boost::asio::cancellation_type::terminal | boost::asio::cancellation_type::partial)) ==
            boost::asio::cancellation_type::none) {
          return;
        }
        auto op = weak_op.lock();
        auto core = weak_core.lock();
        if (op && core && op->request_cancel()) core->cancellation_requested(op);
      });
    }
    return op;
  }

  template <class Deliver, class Signature, class Token>
  auto start(detail::prepared_transfer transfer, std::optional<CUstream> stream, Deliver deliver, Token&& token) {
    return boost::asio::async_initiate<Token, Signature>(
        initiation{executor_,
                   [this, stream, deliver = std::move(deliver)](auto handler, detail::prepared_transfer transfer) mutable {
                     check_executor_alive();
                     auto make = [&] { return make_operation(std::move(handler), std::move(deliver)); };
                     core_->start(detail::operation_factory(make), std::move(transfer), stream);
                     detail::stage_trace::mark(detail::stage_trace::stage::initiating_call_returns);
                   }},
        token, std::move(transfer));
  }

  template <class Token>
  auto start_transfer(detail::prepared_transfer transfer, std::optional<CUstream> stream, Token&& token) {
    return start<deliver_bytes, transfer_signature>(std::move(transfer), stream, deliver_bytes{}, std::forward<Token>(token));
  }
  template <class Token>
  auto start_status(detail::prepared_transfer transfer, std::optional<CUstream> stream, Token&& token) {
    return start<deliver_status, status_signature>(std::move(transfer), stream, deliver_status{}, std::forward<Token>(token));
  }
  template <class Vector, class Token>
  auto start_owning(detail::prepared_transfer transfer, std::optional<CUstream> stream, std::shared_ptr<Vector> owned,
                    Token&& token) {
    transfer.registrable = false;  // handed back to the caller, who frees it where ferry cannot see
    return start<deliver_vector<Vector>, void(boost::system::error_code, Vector)>(
        std::move(transfer), stream, deliver_vector<Vector>{std::move(owned)}, std::forward<Token>(token));
  }

  // Its context's shutdown, as the handlers' registry sees it: the registry outlives the context.
  void check_executor_alive() const {
    if (executor_registry_->shut_down_flag()) {
      throw std::logic_error(
          "ferry::engine: the execution context of the engine's executor has shut down (its io_context was "
          "destroyed or shut down); an engine must not outlive it, and no operation was started");
    }
  }

  executor_type executor_;
  std::shared_ptr<detail::pending_handlers::registry> executor_registry_;
  std::shared_ptr<detail::engine_core> core_;
};

}  // namespace ferry
