// The server's bounded memory: pairs of a pageable host buffer and a device buffer, in power-of-two size
// classes, reused from request to request. The budget bounds the bytes of the pairs leased out plus those
// kept idle for reuse (each pair counts its class size once, and holds that much on the host and on the
// device). A request that does not fit waits, asynchronously and in arrival order, for leases to come back:
// the connection then reads nothing more from its socket, which is the server's back-pressure.
//
// Reuse matters to the GPU path as much as to the allocator: a host buffer seen again lets ferry's
// planner register it once instead of staging it every time, and no request pays cuMemAlloc.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "ferry/buffers.hpp"
#include "ferry/context.hpp"

namespace ferry::pipeline {

// Bytes past a class's data where the GPU step writes the checksum, in the same buffers, so that one
// peek brings the result and its checksum back: at offset checksum_offset(n) for n bytes of data.
inline constexpr std::size_t checksum_slot_bytes = 16;
constexpr std::size_t checksum_offset(std::size_t data_bytes) { return (data_bytes + 15) / 16 * 16; }

class buffer_pool;

// Host memory of whole pages (std::aligned_alloc), released with std::free. Page-locking works on
// pages: a buffer that shared a page with another could not be registered once the other was.
struct free_host_memory {
  void operator()(std::uint8_t* memory) const noexcept;
};

struct staging_pair {
  std::size_t class_bytes = 0;
  std::unique_ptr<std::uint8_t[], free_host_memory> host;  // class_bytes + checksum_slot_bytes, pageable
  device_buffer<std::uint8_t> device;  // as many bytes, 256-byte aligned (cuMemAlloc)
  // What the GPU stage keeps for the host buffer while it lives (ferry's stage: its registration).
  // Declared after `host`, so that it goes first.
  std::shared_ptr<void> stage_hold;
  std::span<std::uint8_t> host_span() const noexcept { return {host.get(), class_bytes + checksum_slot_bytes}; }
};

// A pair leased for one request; goes back to the pool when destroyed.
class buffer_lease {
 public:
  buffer_lease() = default;
  buffer_lease(buffer_pool* pool, std::unique_ptr<staging_pair> pair) noexcept : pool_(pool), pair_(std::move(pair)) {}
  buffer_lease(buffer_lease&& other) noexcept = default;
  buffer_lease& operator=(buffer_lease&& other) noexcept;
  ~buffer_lease();
  explicit operator bool() const noexcept { return pair_ != nullptr; }
  staging_pair& pair() const noexcept { return *pair_; }

 private:
  buffer_pool* pool_ = nullptr;
  std::unique_ptr<staging_pair> pair_;
};

// Where a lease waits when the budget is spent. A request whose buffers grow as its payload arrives
// holds a smaller pair while it waits for the next, and has reserved the room to grow (request_loop): it
// goes before requests that hold nothing, so that a stream of new requests can neither starve it nor, by
// taking the room it reserved, leave every growing request waiting for another.
enum class lease_turn { in_arrival_order, before_new_requests };

class buffer_pool {
 public:
  struct occupancy {
    std::size_t leased_bytes = 0;
    std::size_t idle_bytes = 0;
    std::size_t budget_bytes = 0;
    std::size_t waiting = 0;  // requests waiting for room
  };

  // What the GPU stage is told of host buffers: `adopt` is called with each new one and may return
  // something to keep with it (a registration); `before_free` just before one is freed (the server tells
  // ferry to forget it: see engine::forget_host_memory). Both optional.
  struct host_buffer_hooks {
    std::function<std::shared_ptr<void>(std::span<std::uint8_t>)> adopt;
    std::function<void(std::span<std::uint8_t>)> before_free;
  };

  // Device buffers are allocated in `context`. Throws std::invalid_argument when budget_bytes is below
  // the smallest class.
  buffer_pool(std::size_t budget_bytes, context_ref context, host_buffer_hooks hooks);
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
  // Every lease must have come back.
  ~buffer_pool();

  // The class that holds `bytes` of data: the next power of two, at least 4 KiB.
  static std::size_t class_of(std::size_t bytes) noexcept;

  // A pair of the class of `bytes`, once it fits in the budget. Waits in arrival order (leases of
  // lease_turn::before_new_requests before the others); `cancel` (a terminal or partial cancellation)
  // ends the wait, and when `given_up` (optional) then answers true the coroutine gets no lease (an empty
  // one). Throws std::invalid_argument when the class is larger than the whole budget, and what the
  // allocations throw (ferry::out_of_memory, ...) with nothing held.
  boost::asio::awaitable<buffer_lease> acquire(std::size_t bytes, boost::asio::cancellation_slot cancel,
                                               std::function<bool()> given_up = {},
                                               lease_turn turn = lease_turn::in_arrival_order);

  occupancy current() const;

 private:
  friend class buffer_lease;
  struct waiter {
    explicit waiter(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    boost::asio::steady_timer timer;
    lease_turn turn = lease_turn::in_arrival_order;
    bool woken = false;  // guarded by mutex_
  };

  void give_back(std::unique_ptr<staging_pair> pair) noexcept;
  // Under mutex_: tells the first waiter to try again.
  void wake_head();
  // Under mutex_: whether a lease of `turn` (`me`, when already queued) may be granted now, before the
  // budget is even looked at.
  bool my_turn(const std::shared_ptr<waiter>& me, lease_turn turn) const;
  // Under mutex_: queues `me` behind those it may not pass.
  void enqueue(std::shared_ptr<waiter> me);
  // Frees pairs (outside mutex_), telling the hook first.
  void release(std::vector<std::unique_ptr<staging_pair>> pairs) noexcept;
  std::unique_ptr<staging_pair> allocate(std::size_t class_bytes);

  const std::size_t budget_;
  const context_ref context_;
  const host_buffer_hooks hooks_;
  mutable std::mutex mutex_;
  std::size_t leased_ = 0;
  std::size_t idle_bytes_ = 0;
  std::map<std::size_t, std::vector<std::unique_ptr<staging_pair>>> idle_;  // by class
  std::deque<std::shared_ptr<waiter>> waiters_;
};

}  // namespace ferry::pipeline
