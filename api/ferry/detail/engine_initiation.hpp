// What ferry::engine's initiating functions hand to async_initiate: the initiation (naming the engine's
// executor), the operation that owns the handler, and how each kind of op delivers its result.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <utility>

#include "ferry/detail/engine_core.hpp"
#include "ferry/detail/handler_completion.hpp"
#include "ferry/detail/op_blocks.hpp"
#include "ferry/detail/operation.hpp"

namespace ferry::detail {

// The launch of an op, naming the engine's executor as its associated executor, as the initiations of
// Asio's I/O objects do. Tokens that take their executor from the initiation (experimental::use_promise)
// then resume on the engine's executor, not a system thread.
template <class Launch>
struct initiation {
  using executor_type = boost::asio::any_io_executor;
  initiation(executor_type executor, Launch launch) : executor(std::move(executor)), launch(std::move(launch)) {}
  executor_type executor;
  Launch launch;
  executor_type get_executor() const noexcept { return executor; }
  template <class Handler, class... Arguments>
  void operator()(Handler&& handler, Arguments&&... arguments) {
    launch(std::forward<Handler>(handler), std::forward<Arguments>(arguments)...);
  }
};

// How an op's (error, bytes) reaches the handler's signature.
struct deliver_bytes {
  template <class Handler>
  void operator()(Handler&& handler, boost::system::error_code error, std::size_t bytes) {
    std::move(handler)(error, bytes);
  }
};
struct deliver_status {
  template <class Handler>
  void operator()(Handler&& handler, boost::system::error_code error, std::size_t) {
    std::move(handler)(error);
  }
};
template <class Vector>
struct deliver_vector {
  std::shared_ptr<Vector> owned;
  template <class Handler>
  void operator()(Handler&& handler, boost::system::error_code error, std::size_t) {
    std::move(handler)(error, std::move(*owned));
  }
};

// An operation with its handler's completion inside it: the op, the completion and the shared_ptr's
// count are one allocation.
template <class Handler, class Deliver>
class operation_with_handler final : public operation {
 public:
  operation_with_handler(Handler handler, const boost::asio::any_io_executor& executor, Deliver deliver,
                         awake_times awake)
      : completion_(std::move(handler), executor, std::move(deliver), awake) {
    set_completion(completion_);
  }
  handler_completion<Handler, Deliver>& completion() noexcept { return completion_; }

 private:
  handler_completion<Handler, Deliver> completion_;
};

// The operation that owns `handler` until its completion runs it on `executor` (the handler's own when it
// has one), and the handler's cancellation slot connected to it. The slot's handler holds the op and the
// engine weakly: a request after completion, or after the engine is gone, does nothing.
//
// The op's memory is one of ferry's reused blocks (op_blocks.hpp: an op is freed on another thread than
// the one that started it, unless a coroutine started it), not from the handler's associated allocator:
// the engine may hold an op after its handler has run (a batch that still carries a copy cancelled
// before launch), and Asio's rule is that memory from the associated allocator is freed before the
// handler is invoked.
template <class Handler, class Deliver>
std::shared_ptr<operation> make_operation(Handler handler, Deliver deliver, const boost::asio::any_io_executor& executor,
                                          const std::shared_ptr<engine_core>& core) {
  auto slot = boost::asio::get_associated_cancellation_slot(handler);
  auto op = std::allocate_shared<operation_with_handler<Handler, Deliver>>(
      op_blocks::allocator<void>(), std::move(handler), executor, std::move(deliver),
      awake_times{core->executor_spin(), core->executor_linger()});
  op->completion().enlist(op);
  if (slot.is_connected()) {
    std::weak_ptr<operation> weak_op = op;
    slot.assign([weak_op, weak_core = std::weak_ptr(core)](boost::asio::cancellation_type type) {
      if ((type & (boost::asio::cancellation_type::terminal | boost::asio::cancellation_type::partial)) ==
          boost::asio::cancellation_type::none) {
        return;
      }
      auto op = weak_op.lock();
      auto core = weak_core.lock();
      if (op && core && op->request_cancel()) core->cancellation_requested(op);
    });
  }
  return op;
}

}  // namespace ferry::detail
