// The server's GPU lanes (streams, for ferry's stage): a fixed number shared by all connections, so that
// a thousand connections do not make a thousand streams. A request borrows a lane for its GPU step only
// and gives it back before its reply is written. Lanes are opened on demand, the first time every lane
// already open is busy, up to the pool's size; then borrowers wait, asynchronously and in arrival order,
// and a lane given back goes straight to the longest waiter.
//
// A lane is given back only once the GPU is done with its work (gpu_lane::run never returns earlier), so
// the next borrower's work never queues behind another request's on the same stream.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "examples/pipeline_server/gpu_stage.hpp"

namespace ferry::pipeline {

class lane_pool;

// A lane borrowed for one request; goes back to the pool when destroyed.
class lane_loan {
 public:
  lane_loan() = default;
  lane_loan(lane_pool* pool, std::unique_ptr<gpu_lane> lane) noexcept : pool_(pool), lane_(std::move(lane)) {}
  lane_loan(lane_loan&& other) noexcept = default;
  lane_loan& operator=(lane_loan&& other) noexcept;
  ~lane_loan();
  explicit operator bool() const noexcept { return lane_ != nullptr; }
  gpu_lane& operator*() const noexcept { return *lane_; }
  gpu_lane* operator->() const noexcept { return lane_.get(); }

 private:
  lane_pool* pool_ = nullptr;
  std::unique_ptr<gpu_lane> lane_;
};

class lane_pool {
 public:
  struct occupancy {
    std::size_t opened = 0;  // lanes made so far (at most size)
    std::size_t busy = 0;    // lent out now
    std::size_t size = 0;
    std::size_t waiting = 0;  // requests waiting for a lane
  };

  // Lanes come from `stage`, which must outlive the pool. Throws std::invalid_argument when size is 0.
  lane_pool(gpu_stage& stage, std::size_t size);
  lane_pool(const lane_pool&) = delete;
  lane_pool& operator=(const lane_pool&) = delete;
  // Every loan must have come back. The lanes are closed in the stage's context.
  ~lane_pool();

  // A lane, once one is free. Waits in arrival order; `cancel` (a terminal or partial cancellation) ends
  // the wait, and when `given_up` (optional) then answers true the coroutine gets no lane (an empty loan).
  // Throws what gpu_stage::open_lane throws, with nothing held.
  boost::asio::awaitable<lane_loan> borrow(boost::asio::cancellation_slot cancel, std::function<bool()> given_up = {});

  occupancy current() const;

 private:
  friend class lane_loan;
  struct waiter {
    explicit waiter(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    boost::asio::steady_timer timer;
    // Set under mutex_ by whoever takes the waiter off the queue: the lane handed over, or none and
    // `woken` when a slot to open a lane came free instead.
    std::unique_ptr<gpu_lane> lane;
    bool woken = false;
  };

  void give_back(std::unique_ptr<gpu_lane> lane) noexcept;
  // Under mutex_: takes the first waiter off the queue and wakes it (with `lane`, or to open one).
  void wake_head(std::unique_ptr<gpu_lane> lane);

  gpu_stage& stage_;
  const std::size_t size_;
  mutable std::mutex mutex_;
  std::size_t opened_ = 0;
  std::size_t busy_ = 0;
  std::vector<std::unique_ptr<gpu_lane>> idle_;
  std::deque<std::shared_ptr<waiter>> waiters_;
};

// A lane for one step under `limit` (its deadline ends the wait), or none and the outcome that says why:
// gpu_error when no stream could be made, deadline_exceeded when the deadline passed first.
boost::asio::awaitable<std::pair<lane_loan, stage_outcome>> borrow_within(lane_pool& lanes, deadline& limit);

}  // namespace ferry::pipeline
