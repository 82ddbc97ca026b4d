// What ferry::remote's initiating functions hand to the UCX machinery behind them (engine/remote): the
// handler, type-erased as a completion, and a request handle that the handler's cancellation slot
// reaches. Nothing from UCX's headers appears here.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/cancellation_type.hpp>

#include <chrono>
#include <memory>
#include <utility>

#include "ferry/detail/engine_initiation.hpp"
#include "ferry/detail/handler_completion.hpp"

namespace ferry::remote::detail {

class endpoint_core;
class worker_core;

// One remote operation in flight: what UCX is doing for it, and its cancellation state. Defined in
// engine/remote; the cancellation slot holds it weakly, so a request after completion does nothing.
class request {
 public:
  virtual ~request() = default;
  // From the handler's cancellation slot, on any thread.
  virtual void cancel() noexcept = 0;
};

using completion_ptr = std::unique_ptr<ferry::detail::completion>;

// The handler as a completion that posts it to its associated executor (never inside the initiating
// call; the worker's progress pass runs it at once where its executor allows: in_place_completions), with
// the cancellation slot connected once the request exists.
template <class Handler, class Deliver>
completion_ptr make_completion(Handler handler, Deliver deliver, const boost::asio::any_io_executor& executor) {
  auto made = std::make_unique<ferry::detail::handler_completion<Handler, Deliver>>(
      std::move(handler), executor, std::move(deliver), ferry::detail::awake_times{});
  made->enlist(nullptr);  // held by the worker's machinery, not by an op
  return made;
}

// Connects `slot` (terminal and partial cancellation) to the op's request.
template <class Slot>
void connect_cancellation(Slot slot, const std::shared_ptr<request>& started) {
  if (!slot.is_connected() || !started) return;
  slot.assign([weak = std::weak_ptr(started)](boost::asio::cancellation_type type) {
    if ((type & (boost::asio::cancellation_type::terminal | boost::asio::cancellation_type::partial)) ==
        boost::asio::cancellation_type::none) {
      return;
    }
    if (auto op = weak.lock()) op->cancel();
  });
}

}  // namespace ferry::remote::detail
