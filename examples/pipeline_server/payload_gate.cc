#include "examples/pipeline_server/payload_gate.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;

namespace ferry::pipeline {

gate_pass& gate_pass::operator=(gate_pass&& other) noexcept {
  gate_pass old(std::move(*this));
  gate_ = std::exchange(other.gate_, nullptr);
  units_ = std::exchange(other.units_, 0);
  return *this;
}

gate_pass::~gate_pass() {
  if (gate_) gate_->leave(units_);
}

payload_gate::payload_gate(std::size_t size) : size_(size) {
  if (size == 0) throw std::invalid_argument("payload_gate: size is 0");
}

payload_gate::occupancy payload_gate::current() const {
  std::lock_guard lock(mutex_);
  return occupancy{inside_, waiters_.size(), size_};
}

void payload_gate::admit_waiters() {
  // Strictly in order: a small waiter behind a large one does not pass it, so the large one is not starved.
  while (!waiters_.empty() && inside_ + waiters_.front()->units <= size_) {
    std::shared_ptr<waiter> head = waiters_.front();
    waiters_.pop_front();
    inside_ += head->units;
    head->admitted = true;
    // The timer belongs to the waiting coroutine's executor (its strand): touched only there. Moving its
    // expiry to the past wakes a wait already started and makes one not yet started return at once.
    asio::post(head->timer.get_executor(), [head] { head->timer.expires_at(asio::steady_timer::time_point::min()); });
  }
}

void payload_gate::leave(std::size_t units) noexcept {
  std::lock_guard lock(mutex_);
  inside_ -= units;
  admit_waiters();
}

asio::awaitable<gate_pass> payload_gate::enter(asio::cancellation_slot cancel, std::function<bool()> given_up,
                                               std::size_t units) {
  if (units == 0 || units > size_) {
    throw std::invalid_argument("payload_gate::enter: units " + std::to_string(units) + " is not between 1 and the gate's size " +
                                std::to_string(size_));
  }
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<waiter> me;
  {
    std::lock_guard lock(mutex_);
    // Strictly in arrival order: a newcomer does not pass requests already waiting.
    if (waiters_.empty() && inside_ + units <= size_) {
      inside_ += units;
    } else {
      me = std::make_shared<waiter>(executor);
      me->units = units;
      me->timer.expires_at(asio::steady_timer::time_point::max());
      waiters_.push_back(me);
    }
  }
  if (!me) co_return gate_pass(this, units);
  co_await me->timer.async_wait(asio::bind_cancellation_slot(cancel, asio::as_tuple(asio::use_awaitable)));
  // The wait's handler stays in the slot after it completes, referring to this timer: the caller's next
  // cancellation must not reach it once the timer is gone.
  if (cancel.is_connected()) cancel.clear();
  {
    std::lock_guard lock(mutex_);
    if (!me->admitted) {  // cancelled while queued: leave the queue, which may let smaller ones behind in
      const bool was_head = waiters_.front() == me;
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), me));
      if (was_head) admit_waiters();
      co_return gate_pass{};
    }
  }
  gate_pass pass(this, units);
  // A pass and a cancellation can cross: the caller's flag says whether it still wants it.
  if (given_up && given_up()) co_return gate_pass{};  // `pass` goes on to the next waiter
  co_return pass;
}

}  // namespace ferry::pipeline
