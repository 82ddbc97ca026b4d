// A bounded pool of pinned staging chunks for pageable transfers: allocated once (allocating pinned
// memory is slower than the copy it would serve, so never per call), leased one chunk at a time, and
// returned only by the engine when the GPU is done with the chunk. An op that finds no free chunk waits
// asynchronously; the pool never grows past its bound.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/driver/driver_table.hpp"
#include "ferry/detail/operation.hpp"

namespace ferry::detail {

class staging_pool {
 public:
  using chunk = std::byte*;
  // Called with a chunk, or with nullptr when the waiting op was cancelled. Runs on whichever thread
  // released the chunk (or requested the cancellation): it must only hand work on, not do it.
  using on_lease = std::function<void(chunk)>;

  staging_pool(const driver_table& driver, std::size_t chunk_bytes, std::size_t chunks);
  staging_pool(const staging_pool&) = delete;
  staging_pool& operator=(const staging_pool&) = delete;
  ~staging_pool();

  std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }

  // Leases a chunk for `op`: calls `ready` at once when one is free (allocating the pool's memory on
  // first use), else when one is released. Throws out_of_memory when the pinned memory cannot be had.
  void lease(const std::shared_ptr<operation>& op, on_lease ready);
  // A chunk if one is free now and no op waits for one, else nullptr. Throws as lease() does.
  chunk try_lease();
  // For work that takes its chunk at its call and may then wait behind other work on its stream before
  // the chunk goes there (a block list, packed at its call): as try_lease, but never the last free chunk.
  // Such holders then hold at most all chunks but one, and the op at the head of a stream that waits for
  // a chunk (a staged transfer, holding its stream's turn) always gets one: were they allowed every
  // chunk, lists queued behind staged transfers on two streams could hold what both wait for.
  chunk try_lease_ahead();
  void release(chunk released);
  // Hands nullptr to waiters whose op has been cancelled.
  void wake_cancelled();

  std::size_t free_chunks() const;
  // Pinned bytes the pool holds: all its chunks once a pageable transfer has needed them, else 0.
  std::size_t allocated_bytes() const;

 private:
  // Allocates the pool's memory on first use (under mutex_).
  void allocate_once();
  // A free chunk if more than `kept` are free and no op waits for one, else nullptr.
  chunk take_free(std::size_t kept);

  const driver_table& driver_;
  std::size_t chunk_bytes_;
  std::size_t chunk_count_;
  mutable std::mutex mutex_;
  void* memory_ = nullptr;
  std::vector<chunk> free_;
  std::deque<std::pair<std::weak_ptr<operation>, on_lease>> waiters_;
};

}  // namespace ferry::detail
