// A deadline for the asynchronous operations of one step (a request, a reply's write): when it passes,
// the operation bound to its cancellation slot gets a terminal cancellation. Socket operations then end
// with operation_aborted; ferry's operations stop before their next chunk and complete with
// operation_aborted once the GPU is done with the memory they were given.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>

namespace ferry::pipeline {

class deadline {
 public:
  // `executor` must be the one that runs the guarded operations (a connection's strand): the timer
  // emits the cancellation there, never concurrently with the operation's own steps.
  deadline(boost::asio::any_io_executor executor, std::chrono::steady_clock::duration after)
      : state_(std::make_shared<state>(std::move(executor))) {
    state_->timer.expires_after(after);
    state_->timer.async_wait([state = state_](boost::system::error_code error) {
      if (error) return;  // disarmed
      state->expired = true;
      state->signal.emit(boost::asio::cancellation_type::terminal);
    });
  }
  deadline(const deadline&) = delete;
  deadline& operator=(const deadline&) = delete;
  ~deadline() { disarm(); }

  // Bind one operation at a time to it (a slot holds one handler).
  boost::asio::cancellation_slot slot() noexcept { return state_->signal.slot(); }
  bool expired() const noexcept { return state_->expired; }
  // The step is over: the deadline no longer cancels anything.
  void disarm() noexcept { state_->timer.cancel(); }

 private:
  struct state {
    explicit state(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    boost::asio::steady_timer timer;
    boost::asio::cancellation_signal signal;
    bool expired = false;
  };
  // Shared with the timer's handler, which may run after the deadline is gone (with operation_aborted).
  std::shared_ptr<state> state_;
};

}  // namespace ferry::pipeline
