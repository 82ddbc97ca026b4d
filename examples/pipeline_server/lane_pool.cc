#include "examples/pipeline_server/lane_pool.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ferry/context.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {

lane_loan& lane_loan::operator=(lane_loan&& other) noexcept {
  lane_loan old(std::move(*this));
  pool_ = other.pool_;
  lane_ = std::move(other.lane_);
  return *this;
}

lane_loan::~lane_loan() {
  if (lane_ && pool_) pool_->give_back(std::move(lane_));
}

lane_pool::lane_pool(gpu_stage& stage, std::size_t size) : stage_(stage), size_(size) {
  if (size == 0) throw std::invalid_argument("lane_pool: size is 0");
}

lane_pool::~lane_pool() {
  context_guard in_stage(stage_.context());
  idle_.clear();
}

lane_pool::occupancy lane_pool::current() const {
  std::lock_guard lock(mutex_);
  return occupancy{opened_, busy_, size_, waiters_.size()};
}

void lane_pool::wake_head(std::unique_ptr<gpu_lane> lane) {
  std::shared_ptr<waiter> head = waiters_.front();
  waiters_.pop_front();
  head->lane = std::move(lane);
  head->woken = true;
  // The timer belongs to the waiting coroutine's executor (its strand): touched only there. Moving its
  // expiry to the past wakes a wait already started and makes one not yet started return at once.
  asio::post(head->timer.get_executor(), [head] { head->timer.expires_at(asio::steady_timer::time_point::min()); });
}

void lane_pool::give_back(std::unique_ptr<gpu_lane> lane) noexcept {
  std::lock_guard lock(mutex_);
  if (!waiters_.empty()) {
    wake_head(std::move(lane));  // still busy: lent on at once
    return;
  }
  --busy_;
  try {
    idle_.push_back(std::move(lane));
  } catch (...) {
    --opened_;  // could not keep it: closed here, by unique_ptr, and its slot may be opened again
  }
}

asio::awaitable<lane_loan> lane_pool::borrow(asio::cancellation_slot cancel, std::function<bool()> given_up) {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<waiter> me;
  bool first_in_line = false;  // woken to open a lane: ahead of those still queued
  for (;;) {
    bool open_one = false;
    std::unique_ptr<gpu_lane> reused;
    {
      std::lock_guard lock(mutex_);
      // Strictly in arrival order: a newcomer does not pass requests already waiting.
      if (waiters_.empty() || first_in_line) {
        if (!idle_.empty()) {
          reused = std::move(idle_.back());  // the most recently used: fewer lanes stay warm
          idle_.pop_back();
          ++busy_;
        } else if (opened_ < size_) {
          ++opened_;
          ++busy_;
          open_one = true;
        }
      }
      if (!reused && !open_one) {
        if (!me) me = std::make_shared<waiter>(executor);
        me->woken = false;
        me->timer.expires_at(asio::steady_timer::time_point::max());
        if (first_in_line) {
          waiters_.push_front(me);
        } else {
          waiters_.push_back(me);
        }
      }
    }
    if (reused) co_return lane_loan(this, std::move(reused));
    if (open_one) {
      try {
        co_return lane_loan(this, stage_.open_lane());
      } catch (...) {
        std::lock_guard lock(mutex_);
        --opened_;
        --busy_;
        if (!waiters_.empty()) wake_head(nullptr);  // the slot is free again: the next one may try
        throw;
      }
    }
    co_await me->timer.async_wait(asio::bind_cancellation_slot(cancel, asio::as_tuple(asio::use_awaitable)));
    std::unique_ptr<gpu_lane> handed;
    {
      std::lock_guard lock(mutex_);
      const bool still_wanted = !(given_up && given_up());
      if (!me->woken) {  // cancelled while queued: leave the queue
        waiters_.erase(std::find(waiters_.begin(), waiters_.end(), me));
        co_return lane_loan{};
      }
      // A wake-up and a cancellation can cross: the caller's flag says whether it still wants the lane.
      if (!me->lane) {
        if (still_wanted) {
          first_in_line = true;
          continue;
        }
        if (!waiters_.empty()) wake_head(nullptr);  // pass the free slot on
        co_return lane_loan{};
      }
      handed = std::move(me->lane);
      if (still_wanted) co_return lane_loan(this, std::move(handed));
    }
    give_back(std::move(handed));  // given up after all: to the next waiter, outside the lock
    co_return lane_loan{};
  }
}

asio::awaitable<std::pair<lane_loan, stage_outcome>> borrow_within(lane_pool& lanes, deadline& limit) {
  std::string failure;
  try {
    lane_loan lane = co_await lanes.borrow(limit.slot(), [&limit] { return limit.expired(); });
    if (lane) co_return std::pair{std::move(lane), stage_outcome{}};
  } catch (const std::exception& error) {  // no stream could be made: nothing is held
    failure = error.what();
  }
  if (!failure.empty()) co_return std::pair{lane_loan{}, stage_outcome{status::gpu_error, "no GPU lane for the request: " + failure, 0}};
  co_return std::pair{lane_loan{},
                      stage_outcome{status::deadline_exceeded, "the request's deadline passed while it waited for a GPU lane", 0}};
}

}  // namespace ferry::pipeline
