#include "ferry/detail/operation.hpp"

#include <boost/asio/error.hpp>

namespace ferry::detail {

bool operation::finish() {
  state current = state_.load();
  while (current != state::completed) {
    if (state_.compare_exchange_weak(current, state::completed)) {
      boost::system::error_code error;
      if (failed_.load(std::memory_order_acquire)) {
        std::lock_guard lock(mutex_);
        error = error_;
      }
      // A failure outranks a cancellation: the caller learns what really happened to its bytes.
      if (!error && current == state::cancel_requested) error = boost::asio::error::operation_aborted;
      done_->complete(error, bytes_.load());
      return true;
    }
  }
  return false;
}

}  // namespace ferry::detail
