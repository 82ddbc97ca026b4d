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
//     co_await gpu.peek(dev.get(), host, asio::use_awaitable);
//   }, asio::detached);
//   io.run();
//
// Each operation has one signature: its arguments, then optionally transfer_options (the stream, a forced
// plan), then the completion token. Host memory is given as one argument whose type says what it is:
// pinned_span<T> (page-locked), a std::vector<T> by rvalue (owned by the op and handed back), or anything
// that is a std::span<T> (pageable: a span, a vector, an array). 2-D regions are pitched_views.
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
// - Lifetime of arguments: host memory passed by span or pinned_span, and device memory, must stay valid
//   until the handler runs. A std::vector passed by rvalue is owned by the op and handed back in the
//   completion (signature void(error_code, std::vector<T>)). Other rvalue containers do not compile.
// - Which thread runs the handler: a thread running the handler's associated executor (the engine's
//   executor when the handler has none), through asio::post, or, for an io_context's own executor, run
//   by the engine's keep-awake task on one of its threads (docs/engine.md, "Keeping the handler's io_context
//   awake"); never the initiating thread inside the initiating call, never an engine thread. Work is
//   tracked on the engine's executor until the handler is handed to its executor, and on the
//   handler's until it has run.
// - Memory: an op's state comes from the global allocator, not the handler's associated allocator; the
//   engine holds it until the GPU is done with the op's memory, which can be after the handler has run
//   (Asio asks that associated-allocator memory be freed before the handler is invoked).
// - Ordering: ops given the same stream (transfer_options::stream) run in submission order; ops given none run on pool streams
//   and may overlap. order(first, then) makes later work on `then` wait for work on `first` (an event,
//   never a host wait); wait_all completes when everything submitted before it is done, and
//   wait(stream) when the work queued on a stream before it is done, whoever queued it.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>

#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "ferry/blocks.hpp"
#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/detail/engine_core.hpp"
#include "ferry/detail/engine_initiation.hpp"
#include "ferry/detail/memory_sides.hpp"
#include "ferry/detail/peer_paths.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/engine_options.hpp"
#include "ferry/error.hpp"
#include "ferry/managed.hpp"
#include "ferry/pointers.hpp"
#include "ferry/stream.hpp"
#include "ferry/views.hpp"

namespace ferry {

using transfer_signature = void(boost::system::error_code, std::size_t);
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
        core_(std::make_shared<detail::engine_core>(options)),
        peer_(detail::make_peer_lanes(core_->context(), device::get(core_->device_ordinal()).handle(), options)) {}

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

  // ---- poke: host to device, source.size() elements
  //
  // Completion signature: void(error_code, std::size_t bytes), or void(error_code, std::vector<T>) when
  //   the source is a vector given by rvalue (the op owns it and hands it back). Per-operation
  //   cancellation: terminal, partial; a staged or registered poke stops between chunks and reports the
  //   bytes moved. Lifetime of arguments: the host memory and the device memory until the handler runs.
  //   Which thread runs the handler: one running the handler's associated executor (the engine's by
  //   default), never inside this call.
  // A pinned_span moves with one DMA; pageable memory is registered or staged as the planner decides
  // (see transfer_plan).
  template <class Source, storable T, class Token>
    requires detail::host_source_of<Source, T> && (!std::is_const_v<T>)
  auto poke(Source&& source, device_ptr<T> destination, Token&& token) {
    return poke(std::forward<Source>(source), destination, transfer_options{}, std::forward<Token>(token));
  }
  template <class Source, storable T, class Token>
    requires detail::host_source_of<Source, T> && (!std::is_const_v<T>)
  auto poke(Source&& source, device_ptr<T> destination, transfer_options options, Token&& token) {
    check_not_const_temporary<Source>();
    static_assert(detail::is_owned_vector<Source> || detail::borrowable<Source>,
                  "ferry::engine::poke: an rvalue source other than a std::vector (owned) or a view would dangle");
    if constexpr (detail::is_owned_vector<Source>) {
      auto owned = std::make_shared<std::remove_cv_t<Source>>(std::move(source));
      auto transfer = core_->prepare_copy("engine::poke", owned->size(), sizeof(T), detail::host_side("source", *owned),
                                          detail::device_side("destination", destination.get()));
      return start_owning(std::move(transfer), options, std::move(owned), std::forward<Token>(token));
    } else {
      return start_transfer(core_->prepare_copy("engine::poke", std::size(source), sizeof(T),
                                                detail::host_side("source", source),
                                                detail::device_side("destination", destination.get())),
                            options, std::forward<Token>(token));
    }
  }

  // ---- peek: device to host, destination.size() elements (or `count` into a new vector)
  //
  // Completion signature: void(error_code, std::size_t bytes), or void(error_code, std::vector<T>) for
  //   peek(source, count, ...), which makes the vector after checking the source range (a bad count never
  //   costs host memory). Per-operation cancellation: terminal, partial (a staged peek stops between
  //   chunks; what arrived is reported in bytes). Lifetime of arguments: source and destination until the
  //   handler runs. Which thread runs the handler: one running its associated executor.
  template <storable T, class Destination, class Token>
    requires detail::host_destination_of<Destination, std::remove_const_t<T>>
  auto peek(device_ptr<T> source, Destination&& destination, Token&& token) {
    return peek(source, std::forward<Destination>(destination), transfer_options{}, std::forward<Token>(token));
  }
  template <storable T, class Destination, class Token>
    requires detail::host_destination_of<Destination, std::remove_const_t<T>>
  auto peek(device_ptr<T> source, Destination&& destination, transfer_options options, Token&& token) {
    static_assert(detail::borrowable<Destination>,
                  "ferry::engine::peek: a temporary destination would be gone before the data arrives");
    return start_transfer(core_->prepare_copy("engine::peek", std::size(destination), sizeof(T),
                                              detail::device_side("source", source.get()),
                                              detail::host_side("destination", destination)),
                          options, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<T> source, std::size_t count, Token&& token) {
    return peek(source, count, transfer_options{}, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto peek(device_ptr<T> source, std::size_t count, transfer_options options, Token&& token) {
    core_->check_device_range("engine::peek", count, sizeof(T), detail::device_side("source", source.get()));
    auto owned = std::make_shared<std::vector<std::remove_const_t<T>>>(count);
    auto transfer = core_->prepare_copy("engine::peek", count, sizeof(T), detail::device_side("source", source.get()),
                                        detail::pageable_side("destination", owned->data()));
    return start_owning(std::move(transfer), options, std::move(owned), std::forward<Token>(token));
  }

  // ---- poke_blocks / peek_blocks: many blocks in one operation
  //
  // Completion signature: void(error_code, std::size_t bytes), the bytes of every block. Per-operation
  //   cancellation: terminal, partial (only before the list is on a stream). Lifetime of arguments: the
  //   list itself is read during the call; host memory and device memory until the handler runs (a
  //   pageable poke's blocks packed into a staging chunk are copied during the call, but a list that is
  //   not packed is read where it lies). Which thread runs the handler: one running its associated
  //   executor. On failure the destinations' contents are unspecified.
  // `blocks` is a contiguous range of ferry::block_pair (blocks.hpp). Page-locked blocks move by one launch
  // of the gather/scatter kernel (where the list suits batch_path::automatic's rule, engine_options::
  // batch_kernel_min_copies and batch_kernel_max_mean_bytes, and the device reaches page-locked memory) or
  // one cuMemcpyBatchAsync; transfer_options::batching picks one. Pageable blocks are packed into a
  // staging chunk when they fit one, else staged chunk by chunk, the rule then applied to each chunk's
  // pieces. The written ranges (the device's for a poke, the host's for a peek) may not overlap; every
  // block is checked, and an error names it.
  template <class Blocks, class Token>
    requires detail::poke_block_range<Blocks>
  auto poke_blocks(const Blocks& blocks, Token&& token) {
    return poke_blocks(blocks, transfer_options{}, std::forward<Token>(token));
  }
  template <class Blocks, class Token>
    requires detail::poke_block_range<Blocks>
  auto poke_blocks(const Blocks& blocks, transfer_options options, Token&& token) {
    return start_blocks("engine::poke_blocks", true, blocks, std::move(options), std::forward<Token>(token));
  }
  template <class Blocks, class Token>
    requires detail::peek_block_range<Blocks>
  auto peek_blocks(const Blocks& blocks, Token&& token) {
    return peek_blocks(blocks, transfer_options{}, std::forward<Token>(token));
  }
  template <class Blocks, class Token>
    requires detail::peek_block_range<Blocks>
  auto peek_blocks(const Blocks& blocks, transfer_options options, Token&& token) {
    return start_blocks("engine::peek_blocks", false, blocks, std::move(options), std::forward<Token>(token));
  }

  // ---- copy: device to device (same context), 2-D regions, and between contexts or devices
  //
  // Completion signature: void(error_code, std::size_t bytes). Per-operation cancellation: terminal,
  //   partial (only work not yet on a stream is dropped; otherwise operation_aborted once the GPU is done).
  //   Lifetime of arguments: both arrays until the handler runs. Which thread runs the handler: one running
  //   its associated executor. Small copies given no stream may be batched (transfer_plan::batched).
  // The two sides may not share a byte (the driver's copy of overlapping ranges is undefined). copy and
  // copy_peer refuse [source, source + count) and [destination, destination + count) that overlap (two
  // ranges of one allocation; ranges that only touch are fine); copy_2d refuses two regions where a row of
  // one shares a byte with a row of the other or, where the pitches differ, whose spans (first row's first
  // element to last row's last) meet. Each throws std::invalid_argument naming both sides ("engine::copy:
  // source [0x..., 0x...) and destination [0x..., 0x...) overlap (256 bytes each); the copied areas may
  // not overlap") before anything is enqueued; a copy of no elements is never refused.
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy(device_ptr<S> source, device_ptr<T> destination, std::size_t count, Token&& token) {
    return copy(source, destination, count, transfer_options{}, std::forward<Token>(token));
  }
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy(device_ptr<S> source, device_ptr<T> destination, std::size_t count, transfer_options options,
            Token&& token) {
    return start_transfer(core_->prepare_copy("engine::copy", count, sizeof(T), detail::device_side("source", source.get()),
                                              detail::device_side("destination", destination.get())),
                          options, std::forward<Token>(token));
  }

  // A region of one array to a region of the same size of another. Either side may be device memory
  // (pitched_view<device_ptr<T>>) or page-locked host memory (pitched_view<host_ptr<T>>), both sides too.
  template <class Source, class Destination, class Token>
  auto copy_2d(pitched_view<Source> source, pitched_view<Destination> destination, Token&& token) {
    return copy_2d(source, destination, transfer_options{}, std::forward<Token>(token));
  }
  template <class Source, class Destination, class Token>
  auto copy_2d(pitched_view<Source> source, pitched_view<Destination> destination, transfer_options options,
               Token&& token) {
    using element = typename pitched_view<Destination>::element_type;
    static_assert(std::is_same_v<std::remove_const_t<typename pitched_view<Source>::element_type>, element> &&
                      !std::is_const_v<element>,
                  "ferry::engine::copy_2d: the regions hold different element types, or the destination is const");
    static_assert(!std::is_pointer_v<Source> && !std::is_pointer_v<Destination>,
                  "ferry::engine::copy_2d: host memory must be page-locked (host_ptr); pageable 2-D copies are "
                  "synchronous (ferry::poke_array_2d / peek_array_2d)");
    detail::check_same_extent("engine::copy_2d", source.width, source.height, destination.width, destination.height);
    return start_transfer(core_->prepare_copy_2d("engine::copy_2d", source.width, source.height, sizeof(element),
                                                 detail::memory_side("source", source.base), detail::plane_of(source),
                                                 detail::memory_side("destination", destination.base),
                                                 detail::plane_of(destination)),
                          options, std::forward<Token>(token));
  }

  // From memory of one context to memory of another (another device's, or another context's on one
  // device). How it moves is transfer_options::peer, else engine_options::peer (see peer_path):
  // one copy engine, the copy split over several streams, or a copy kernel on the engine's device.
  // A split copy is still one op: it completes once, with the first failure of its pieces; it is
  // cancellable until it is enqueued, and its pieces are on their streams together. Throws
  // std::invalid_argument for bad ranges, null contexts and a path the devices cannot take, and
  // cuda_error when the kernel path's device queries or its enabling of peer access fail, before
  // anything is enqueued.
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy_peer(device_ptr<S> source, context_ref source_context, device_ptr<T> destination,
                 context_ref destination_context, std::size_t count, Token&& token) {
    return copy_peer(source, source_context, destination, destination_context, count, transfer_options{},
                     std::forward<Token>(token));
  }
  template <storable S, storable T, class Token>
    requires std::is_same_v<std::remove_const_t<S>, T>
  auto copy_peer(device_ptr<S> source, context_ref source_context, device_ptr<T> destination,
                 context_ref destination_context, std::size_t count, transfer_options options, Token&& token) {
    auto transfer = core_->prepare_copy_peer("engine::copy_peer", count, sizeof(T), source.get(), source_context.get(),
                                             destination.get(), destination_context.get());
    detail::choose_peer_path(transfer, options.peer, peer_, source_context.get(), destination_context.get());
    options.peer = peer_path::automatic;  // taken
    return start_transfer(std::move(transfer), options, std::forward<Token>(token));
  }

  // ---- memset (elements of 1, 2, 4, 8 or 16 bytes) and managed prefetch
  //
  // Completion signature: void(error_code). Per-operation cancellation: terminal, partial (as copy).
  //   Lifetime of arguments: the memory until the handler runs; `value` is copied at the call. Which thread
  //   runs the handler: one running its associated executor.
  template <storable T, class Token>
  auto memset(device_ptr<T> destination, std::size_t count, const T& value, Token&& token) {
    return memset(destination, count, value, transfer_options{}, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto memset(device_ptr<T> destination, std::size_t count, const T& value, transfer_options options, Token&& token) {
    return start_status(core_->prepare_fill("engine::memset", destination.get(), count, sizeof(T), &value), options,
                        std::forward<Token>(token));
  }

  template <storable T, class Token>
  auto prefetch(device_ptr<T> managed, std::size_t count, memory_location location, Token&& token) {
    return prefetch(managed, count, location, transfer_options{}, std::forward<Token>(token));
  }
  template <storable T, class Token>
  auto prefetch(device_ptr<T> managed, std::size_t count, memory_location location, transfer_options options,
                Token&& token) {
    return start_status(
        core_->prepare_prefetch("engine::prefetch", managed.get(), count, sizeof(T), location.to_driver()), options,
        std::forward<Token>(token));
  }

  // ---- ordering

  // Completes (void(error_code)) when every op submitted before it has completed: with success, or with
  // the sticky error once the context has failed (sticky_error()). Not cancellable.
  template <class Token>
  auto wait_all(Token&& token) {
    return boost::asio::async_initiate<Token, status_signature>(
        detail::initiation{executor_,
                           [this](auto handler) {
                             check_executor_alive();
                             core_->wait_all(detail::make_operation(std::move(handler), detail::deliver_status{},
                                                                    executor_, core_));
                           }},
        token);
  }

  // Completes (void(error_code)) once all the work queued on `stream` before this call has completed,
  // whoever queued it: ferry's ops given that stream (a staged transfer once its last chunk is done) and
  // the program's own work there (its kernels: kernel_module::launch, cuLaunchKernel; other libraries'
  // work). No thread waits: a completion mark goes on the stream behind that work and the engine's
  // poller watches it, as it watches every op. Fails with the driver's error when that work failed (a
  // kernel's fault, which the context keeps: sticky_error()). Per-operation cancellation: terminal,
  // partial (a wait still queued behind a staged transfer's submission is not put on the stream and
  // completes with operation_aborted when its turn comes; one on the stream, once the work is done).
  // Which thread runs the handler: one running its associated executor, never inside this call. Throws
  // std::invalid_argument, before anything is queued, when `stream` belongs to another context than the
  // engine's or the driver knows no such stream; cuda_error when the driver cannot say.
  template <class Token>
  auto wait(stream_ref stream, Token&& token) {
    core_->check_stream("engine::wait", stream.get());
    return boost::asio::async_initiate<Token, status_signature>(
        detail::initiation{executor_,
                           [this, stream](auto handler) {
                             check_executor_alive();
                             core_->wait_stream(detail::make_operation(std::move(handler), detail::deliver_status{},
                                                                       executor_, core_),
                                                stream.get());
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
  // How many copy_peer ops took each peer_path so far.
  ferry::peer_counts peer_counts() const noexcept { return detail::counts_of(*peer_); }

  // The sticky error that poisoned the engine's context, if any: submits after it fail fast with it.
  std::error_code sticky_error() const noexcept { return core_->sticky_error(); }

  // CPU seconds used by the engine's completion poller (for measuring its idle cost).
  double poller_cpu_seconds() const { return core_->poller_cpu_seconds(); }

  // Bytes of page-locked host memory the engine holds (staging pool and cached registrations), for
  // watching that it stays bounded.
  std::size_t pinned_bytes() const { return core_->pinned_bytes(); }

 private:
  template <class Memory>
  static constexpr void check_not_const_temporary() {
    static_assert(!detail::is_const_temporary_vector<Memory>,
                  "ferry::engine: a const temporary vector can be neither owned (it cannot be moved from) nor "
                  "borrowed (it dies at the end of the call)");
  }

  template <class Signature, class Deliver, class Token>
  auto start(detail::transfer_request transfer, const transfer_options& options, Deliver deliver, Token&& token) {
    if (options.plan != transfer_plan::automatic || options.peer != peer_path::automatic ||
        options.batching != batch_path::automatic) {
      transfer.apply(options, core_->device_ordinal());
    }
    std::optional<CUstream> stream;
    if (options.stream) stream = options.stream->get();
    return boost::asio::async_initiate<Token, Signature>(
        detail::initiation{
            executor_,
            [this, stream, deliver = std::move(deliver)](auto handler, detail::transfer_request transfer) mutable {
              check_executor_alive();
              // Fetched while the work's driver calls run, before the op is made.
              executor_registry_->prefetch_for_submission();
              auto make = [&] { return detail::make_operation(std::move(handler), std::move(deliver), executor_, core_); };
              core_->start(detail::operation_factory(make), std::move(transfer), stream);
            }},
        token, std::move(transfer));
  }

  template <class Blocks, class Token>
  auto start_blocks(std::string_view operation, bool to_device, const Blocks& blocks, transfer_options options,
                    Token&& token) {
    using block_type = std::ranges::range_value_t<Blocks>;
    using host_type = typename block_type::host_type;
    const detail::block_list sides = detail::blocks_of(
        std::span<const block_type>(std::ranges::data(blocks), std::ranges::size(blocks)));
    const detail::memory_kind host_kind = detail::is_pinned_span<std::remove_cv_t<host_type>>
                                              ? detail::memory_kind::pinned_host
                                              : detail::memory_kind::pageable_host;
    auto transfer = core_->prepare_blocks(operation, to_device, host_kind, sides,
                                          sizeof(typename block_type::element_type), options.batching, options.plan);
    options.batching = batch_path::automatic;  // prepare_blocks chose the path
    return start_transfer(std::move(transfer), options, std::forward<Token>(token));
  }

  template <class Token>
  auto start_transfer(detail::transfer_request transfer, const transfer_options& options, Token&& token) {
    return start<transfer_signature>(std::move(transfer), options, detail::deliver_bytes{}, std::forward<Token>(token));
  }
  template <class Token>
  auto start_status(detail::transfer_request transfer, const transfer_options& options, Token&& token) {
    return start<status_signature>(std::move(transfer), options, detail::deliver_status{}, std::forward<Token>(token));
  }
  template <class Vector, class Token>
  auto start_owning(detail::transfer_request transfer, const transfer_options& options, std::shared_ptr<Vector> owned,
                    Token&& token) {
    transfer.hand_back_vector();
    return start<void(boost::system::error_code, Vector)>(std::move(transfer), options,
                                                          detail::deliver_vector<Vector>{std::move(owned)},
                                                          std::forward<Token>(token));
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
  // Shared with the split copies that use its streams: released with the last of them.
  std::shared_ptr<detail::peer_lanes> peer_;
};

}  // namespace ferry
