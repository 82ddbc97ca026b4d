// The non-template machinery behind ferry::engine (implemented in engine/async): streams, events, the
// completion bridge, the staging pool and the ordering of submissions. engine.hpp's templates check
// arguments through it, then hand it an operation to start.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "ferry/detail/operation.hpp"
#include "ferry/detail/prefetch.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/engine_options.hpp"

namespace ferry {
namespace detail {

// A transfer the engine checked, ready to start: opaque here. The engine keeps its prepared transfer
// (engine/transfer/prepared_transfer.hpp) in place in `storage_`, so that preparing and starting an op
// allocate nothing, and a change to what the engine records recompiles the engine, not its users.
// Copyable: a deferred op launched as an lvalue starts a copy.
class transfer_request {
 public:
  static constexpr std::size_t storage_bytes = 256;
  static constexpr std::size_t storage_alignment = 16;

  transfer_request(const transfer_request& other);
  transfer_request(transfer_request&& other) noexcept;
  transfer_request& operator=(const transfer_request& other);
  transfer_request& operator=(transfer_request&& other) noexcept;
  ~transfer_request();

  // The op owns the vector it moves and hands it back to the caller, who frees it where ferry cannot
  // see: it is never registered (a registered range would outlive its pages).
  void hand_back_vector() noexcept;
  // The plan, batch path and peer path the caller chose (transfer_options), checked against this
  // transfer: std::invalid_argument naming the option and the value where it cannot take them, before
  // anything is enqueued. `engine_device`: the engine's device ordinal, which a kernel path must reach.
  void apply(const transfer_options& options, int engine_device);

 private:
  friend class transfer_request_access;  // engine/transfer/prepared_transfer.hpp
  struct empty {};
  explicit transfer_request(empty) noexcept {}

  alignas(storage_alignment) std::byte storage_[storage_bytes];
};

// One block of a vectored transfer as the engine reads it: `count` elements between host memory at
// `host` and device memory at `device`.
struct block_sides {
  std::uintptr_t host;
  CUdeviceptr device;
  std::size_t count;
};

// A caller's list of ferry::block_pair (engine::poke_blocks / peek_blocks) as the engine reads it: where
// it lies, and how to read a run of it or ask the cache for it (made for each block type by blocks_of).
struct block_list {
  const void* blocks;
  std::size_t size;
  // Writes blocks [first, first + out.size()) into `out`, fewer where the list ends first; returns how many.
  std::size_t (*read)(const void* blocks, std::size_t size, std::size_t first, std::span<block_sides> out) noexcept;
  void (*prefetch)(const void* blocks, std::size_t size, std::size_t first, std::size_t count) noexcept;
};

template <class Block>
block_list blocks_of(std::span<const Block> blocks) noexcept {
  auto read = [](const void* list, std::size_t size, std::size_t first, std::span<block_sides> out) noexcept {
    const Block* all = static_cast<const Block*>(list);
    const std::size_t count = first < size ? std::min(out.size(), size - first) : 0;
    for (std::size_t j = 0; j < count; ++j) {
      const Block& b = all[first + j];
      out[j] = {reinterpret_cast<std::uintptr_t>(std::data(b.host)), b.device.get(), std::size(b.host)};
    }
    return count;
  };
  auto prefetch = [](const void* list, std::size_t size, std::size_t first, std::size_t count) noexcept {
    if (first >= size) return;
    prefetch_for_reading(static_cast<const Block*>(list) + first, std::min(count, size - first) * sizeof(Block));
  };
  return {blocks.data(), blocks.size(), read, prefetch};
}

// Makes an op's operation (its handler's completion) when the engine asks: once the work is on its
// stream where it can be put there at once, so that what the op's bookkeeping costs overlaps the GPU's
// work; before anything else otherwise. Refers to the caller's callable, which must outlive the call to
// engine_core::start; start calls it exactly once, or throws before calling it.
class operation_factory {
 public:
  template <class Make>
  explicit operation_factory(Make& make) noexcept
      : make_(&make), call_([](void* target) { return (*static_cast<Make*>(target))(); }) {}
  std::shared_ptr<operation> operator()() const { return call_(make_); }

 private:
  void* make_;
  std::shared_ptr<operation> (*call_)(void*);
};

class engine_core {
 public:
  explicit engine_core(const engine_options& options);
  engine_core(const engine_core&) = delete;
  engine_core& operator=(const engine_core&) = delete;
  // Waits until the GPU is done with every byte of caller and staging memory, completes what is pending,
  // and releases the engine's streams, events and staging.
  ~engine_core();

  CUcontext context() const noexcept;
  int device_ordinal() const noexcept;

  // Argument checks (std::invalid_argument before anything is enqueued). count is in elements.
  transfer_request prepare_copy(std::string_view operation, std::size_t count, std::size_t element_size,
                                 endpoint source, endpoint destination);
  // The device side alone (check_device_range in the engine's context), for ops that allocate the host side.
  void check_device_range(std::string_view operation, std::size_t count, std::size_t element_size, endpoint side);
  transfer_request prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                    std::size_t element_size, endpoint source, plane source_plane,
                                    endpoint destination, plane destination_plane);
  transfer_request prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                      CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                      CUcontext destination_context);
  transfer_request prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                                 std::size_t element_size, const void* pattern);
  transfer_request prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                     std::size_t element_size, CUmemLocation location);
  // Many blocks in one transfer (engine::poke_blocks / peek_blocks): every block checked, the blocks' device
  // ranges (poke) or host ranges (peek) disjoint; `host_kind` pinned_host or pageable_host. `path` and
  // `plan` are the caller's transfer_options (a forced plan is refused: the blocks choose their own way).
  transfer_request prepare_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                                   const block_list& blocks, std::size_t element_size, batch_path path,
                                   transfer_plan plan);

  // Starts a prepared transfer on `stream` (in submission order with other ops given that stream) or,
  // without one, on a pool stream. The op completes through its completion, never inline. When the
  // operation cannot be made after the work is on a stream (it throws), start waits for the stream
  // before it rethrows: no caller memory is left in use.
  void start(operation_factory make_op, transfer_request transfer, std::optional<CUstream> stream);
  void start(std::shared_ptr<operation> op, transfer_request transfer, std::optional<CUstream> stream) {
    auto made = [&op] { return std::move(op); };
    start(operation_factory(made), std::move(transfer), stream);
  }

  // Completes `op` once every operation started before it has completed.
  void wait_all(std::shared_ptr<operation> op);

  // engine::wait's argument check: std::invalid_argument naming `stream` when the driver knows no such
  // stream, or it belongs to another context than the engine's (naming both), before anything is queued.
  void check_stream(std::string_view operation, CUstream stream);
  // Completes `op` once all the work queued on `stream` before the call has completed, whoever queued
  // it: a completion mark goes on the stream behind that work, in submission order with the ops given
  // that stream (after a staged transfer's last chunk).
  void wait_stream(std::shared_ptr<operation> op, CUstream stream);

  // Makes work submitted to `then` from now on wait for work submitted to `first` so far (an event;
  // the host does not wait). A failure to record or wait is reported to options.on_failure.
  void order(CUstream first, CUstream then);

  // Drops the engine's registrations of [address, address + bytes) (see registration_cache.hpp).
  void forget_host_memory(const void* address, std::size_t bytes);
  plan_counts counts() const noexcept;

  // Tells the engine an op's cancellation was requested, so that one waiting for staging gives up now.
  void cancellation_requested(const std::shared_ptr<operation>& op);

  // The sticky error that poisoned the context, if one did: later submits fail fast with it.
  std::error_code sticky_error() const noexcept;

  // engine_options::executor_spin, resolved.
  std::chrono::microseconds executor_spin() const noexcept;
  // How long an io_context is kept awake once no completion is owed there: the poller's spin after
  // activity now (engine_options::spin_window, grown up to max_spin_window with the pauses between ops).
  std::chrono::microseconds executor_linger() const noexcept;

  // CPU seconds the engine's poller thread has used (for the idle-cost benchmark).
  double poller_cpu_seconds() const;

  // Page-locked host memory the engine holds: its staging pool and its registrations.
  std::size_t pinned_bytes() const;

  struct impl;  // public so that the staged-transfer state in engine_core.cc can name it

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace detail
}  // namespace ferry
