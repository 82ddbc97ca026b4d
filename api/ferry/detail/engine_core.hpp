// The non-template machinery behind ferry::engine (implemented in engine/async): streams, events, the
// completion bridge, the staging pool and the ordering of submissions. engine.hpp's templates check
// arguments through it, then hand it an operation to start.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
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

// One unit of the engine's count of small copies in flight (the planner batches a small copy only while
// another is in flight), held by the transfer and given back with it. Allocation-free: a small copy's
// count is taken on the submitting thread and given back on the bridge thread. A copy holds a unit of
// its own, so that a prepared transfer stays copyable (a deferred op launched as an lvalue copies it).
class in_flight_count {
 public:
  in_flight_count() = default;
  explicit in_flight_count(std::atomic<std::size_t>& count) noexcept : count_(&count) { take(); }
  in_flight_count(in_flight_count&& other) noexcept : count_(std::exchange(other.count_, nullptr)) {}
  in_flight_count(const in_flight_count& other) noexcept : count_(other.count_) { take(); }
  in_flight_count& operator=(in_flight_count&& other) noexcept {
    if (this != &other) {
      reset();
      count_ = std::exchange(other.count_, nullptr);
    }
    return *this;
  }
  in_flight_count& operator=(const in_flight_count& other) noexcept {
    if (this != &other) {
      reset();
      count_ = other.count_;
      take();
    }
    return *this;
  }
  ~in_flight_count() { reset(); }

  void reset() noexcept {
    if (count_ != nullptr) std::exchange(count_, nullptr)->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  void take() noexcept {
    if (count_ != nullptr) count_->fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<std::size_t>* count_ = nullptr;
};

class chunk_stager;  // engine/async/chunk_stager.hpp

// A validated transfer, ready to start.
struct prepared_transfer {
  std::string_view operation;  // the public function's name: a string literal
  std::size_t bytes = 0;
  endpoint source{};
  endpoint destination{};
  bool pageable = false;  // a side is pageable host memory: the planner decides how it moves
  // What the checks learned of the pageable side from the driver, so that the planner need not ask again:
  // where host_range_asked, the end of the allocation the driver knows holding it (pinned, registered or
  // managed memory passed as a plain span), or 0 where it knows none.
  bool host_range_asked = false;
  std::uintptr_t host_range_end = 0;
  bool batchable = false;  // a plain 1-D copy, which cuMemcpyBatchAsync can carry
  // Its device sides are memory of the engine's device, which the engine's kernels (the batch path's,
  // the resident copier's) reach; another device's memory only the copy engine reaches.
  bool kernels_reach = false;
  // False for a vector the op owns and hands back: ferry cannot see the caller free it later, so a
  // registration would outlive the memory (a registered range whose pages are gone).
  bool registrable = true;
  transfer_plan plan = transfer_plan::automatic;
  batch_path batching = batch_path::automatic;  // how it moves if batched (transfer_options::batching)
  // The ordinals of the devices holding the sides' memory (-1 for host memory, a copy of no bytes, or
  // memory whose device the driver does not report): what a refused kernel path names.
  int source_device = -1;
  int destination_device = -1;
  std::shared_ptr<void> hold;  // kept until the GPU is done (a registration lease)
  in_flight_count counted;  // the engine's count of small copies in flight, released with the transfer
  in_flight_count on_pool_stream;  // the count of the engine's work on its pool stream (given no stream)
  // Single-submission ops: puts the work on a stream. It is given the transfer itself, so that a plain
  // copy's enqueue keeps no state of its own and std::function holds it without an allocation.
  std::function<CUresult(const prepared_transfer&, CUstream)> enqueue;
  // A staged transfer whose host bytes are not one range (a pageable block list) fills and empties its
  // chunks through this, which `hold` keeps; null where the bytes lie in one range at source and one at
  // destination.
  chunk_stager* stager = nullptr;
  std::string extra;  // what the label adds for 2-D, peer, fill and prefetch ops (empty for plain copies)

  // "engine::poke: 4096 bytes [0x... -> 0x...)": built only when a message needs it.
  std::string label() const;
};

// One block of a vectored transfer as the engine core sees it: `count` elements between host memory at
// `host` and device memory at `device`.
struct block_sides {
  std::uintptr_t host;
  CUdeviceptr device;
  std::size_t count;
};

// A vectored transfer's blocks as the engine core reads them: a run at a time, into a buffer of its own,
// so that the caller's list is read where it lies and never copied whole (each pass over a long list
// lengthens the initiating call, which the GPU waits for).
class block_source {
 public:
  virtual std::size_t size() const noexcept = 0;
  // Writes blocks [first, first + out.size()) into `out`, fewer where the list ends first; returns how many.
  virtual std::size_t read(std::size_t first, std::span<block_sides> out) const noexcept = 0;
  // Asks the cache for blocks [first, first + count) (those in the list), ahead of their read: a list the
  // caller wrote a while ago is in memory, and reading it line by line waits for each line in turn.
  virtual void prefetch(std::size_t first, std::size_t count) const noexcept = 0;

 protected:
  ~block_source() = default;
};

// The blocks of a caller's list of ferry::block_pair (engine::poke_blocks / peek_blocks).
template <class Block>
class blocks_of final : public block_source {
 public:
  explicit blocks_of(std::span<const Block> blocks) noexcept : blocks_(blocks) {}

  std::size_t size() const noexcept override { return blocks_.size(); }
  std::size_t read(std::size_t first, std::span<block_sides> out) const noexcept override {
    const std::size_t count = first < blocks_.size() ? std::min(out.size(), blocks_.size() - first) : 0;
    for (std::size_t j = 0; j < count; ++j) {
      const Block& b = blocks_[first + j];
      out[j] = {reinterpret_cast<std::uintptr_t>(std::data(b.host)), b.device.get(), std::size(b.host)};
    }
    return count;
  }
  void prefetch(std::size_t first, std::size_t count) const noexcept override {
    if (first >= blocks_.size()) return;
    prefetch_for_reading(blocks_.data() + first, std::min(count, blocks_.size() - first) * sizeof(Block));
  }

 private:
  std::span<const Block> blocks_;
};

// Sets the plan a caller forces (transfer_options::plan). Throws std::invalid_argument for
// transfer_plan::batched (the planner's choice for small page-locked copies: a pageable transfer forced to
// it would never be submitted), for registered or staged on a transfer with no pageable side, for
// registered on a vector the op owns, and for values that are no plan.
void force_plan(prepared_transfer& transfer, transfer_plan plan);

// Sets the batch path a caller chooses (transfer_options::batching). Throws std::invalid_argument when
// the transfer can never be batched: given a stream (`on_stream`), with a pageable side, or not a plain
// 1-D copy; for batch_path::kernel where a device side is memory of another device than the engine's
// (`engine_device`), naming the side and both devices; and for values that are no batch_path.
void choose_batch_path(prepared_transfer& transfer, batch_path path, bool on_stream, int engine_device);

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
  prepared_transfer prepare_copy(std::string_view operation, std::size_t count, std::size_t element_size,
                                 endpoint source, endpoint destination);
  // The device side alone (check_device_range in the engine's context), for ops that allocate the host side.
  void check_device_range(std::string_view operation, std::size_t count, std::size_t element_size, endpoint side);
  prepared_transfer prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                    std::size_t element_size, endpoint source, plane source_plane,
                                    endpoint destination, plane destination_plane);
  prepared_transfer prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                      CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                      CUcontext destination_context);
  prepared_transfer prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                                 std::size_t element_size, const void* pattern);
  prepared_transfer prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                     std::size_t element_size, CUmemLocation location);
  // Many blocks in one transfer (engine::poke_blocks / peek_blocks): every block checked, the blocks' device
  // ranges (poke) or host ranges (peek) disjoint; `host_kind` pinned_host or pageable_host. `path` and
  // `plan` are the caller's transfer_options (a forced plan is refused: the blocks choose their own way).
  prepared_transfer prepare_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                                   const block_source& blocks, std::size_t element_size, batch_path path,
                                   transfer_plan plan);

  // Starts a prepared transfer on `stream` (in submission order with other ops given that stream) or,
  // without one, on a pool stream. The op completes through its completion, never inline. When the
  // operation cannot be made after the work is on a stream (it throws), start waits for the stream
  // before it rethrows: no caller memory is left in use.
  void start(operation_factory make_op, prepared_transfer transfer, std::optional<CUstream> stream);
  void start(std::shared_ptr<operation> op, prepared_transfer transfer, std::optional<CUstream> stream) {
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
