// A transfer the engine checked, ready to start (prepared_transfer), as the engine's layers share it:
// engine/transfer's prepare_* make it, engine/async's planner and executors run it. The API's templates
// see only its opaque holder, transfer_request (ferry/detail/engine_core.hpp), which keeps it in place.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ferry/detail/engine_core.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::detail {

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

// The prepared transfer a transfer_request holds (in its storage, from its construction on).
class transfer_request_access {
 public:
  static_assert(sizeof(prepared_transfer) <= transfer_request::storage_bytes &&
                    alignof(prepared_transfer) <= transfer_request::storage_alignment,
                "transfer_request's storage must hold a prepared_transfer: raise storage_bytes");

  static transfer_request make(prepared_transfer&& transfer) {
    transfer_request request(transfer_request::empty{});
    ::new (static_cast<void*>(request.storage_)) prepared_transfer(std::move(transfer));
    return request;
  }
  static prepared_transfer& of(transfer_request& request) noexcept {
    return *std::launder(reinterpret_cast<prepared_transfer*>(request.storage_));
  }
  static const prepared_transfer& of(const transfer_request& request) noexcept {
    return *std::launder(reinterpret_cast<const prepared_transfer*>(request.storage_));
  }
};

inline prepared_transfer& prepared_of(transfer_request& request) noexcept { return transfer_request_access::of(request); }
inline const prepared_transfer& prepared_of(const transfer_request& request) noexcept {
  return transfer_request_access::of(request);
}

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

// For every operation other than copy_peer: std::invalid_argument unless `path` is automatic.
void refuse_peer_path(const prepared_transfer& transfer, peer_path path);

// A vectored transfer's blocks as the engine reads them (engine::poke_blocks / peek_blocks): a run at a
// time, into a buffer of its own, so that the caller's list is read where it lies and never copied whole
// (each pass over a long list lengthens the initiating call, which the GPU waits for).
class block_source {
 public:
  explicit block_source(const block_list& list) noexcept : list_(list) {}
  std::size_t size() const noexcept { return list_.size; }
  // Writes blocks [first, first + out.size()) into `out`, fewer where the list ends first; returns how many.
  std::size_t read(std::size_t first, std::span<block_sides> out) const noexcept {
    return list_.read(list_.blocks, list_.size, first, out);
  }
  // Asks the cache for blocks [first, first + count) (those in the list), ahead of their read: a list the
  // caller wrote a while ago is in memory, and reading it line by line waits for each line in turn.
  void prefetch(std::size_t first, std::size_t count) const noexcept {
    list_.prefetch(list_.blocks, list_.size, first, count);
  }

 private:
  block_list list_;
};

}  // namespace ferry::detail
