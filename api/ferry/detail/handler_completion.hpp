// The bridge from ferry's operations back to Asio: a handler, held until the op completes, then posted
// to its associated executor (never run inside the initiating call), exactly once, with the executor's
// outstanding work tracked meanwhile. If the handler's execution context shuts down first (its
// io_context destroyed with ops in flight), the handler is destroyed there, as Asio destroys its own
// pending handlers, and the completion that arrives later is dropped.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "ferry/detail/operation.hpp"

namespace ferry::detail {

// Per execution context: the completions ferry still owes there.
class pending_handlers : public boost::asio::execution_context::service {
 public:
  struct entry {
    virtual void abandon() noexcept = 0;

   protected:
    ~entry() = default;
  };
  struct registry {
    std::mutex mutex;
    std::set<entry*> live;
    bool shut_down = false;  // under mutex
    std::atomic<bool> shut_down_seen{false};  // the same, readable without the mutex
    bool shut_down_flag() const noexcept { return shut_down_seen.load(std::memory_order_acquire); }
  };

  using key_type = pending_handlers;
  static inline boost::asio::execution_context::id id;

  explicit pending_handlers(boost::asio::execution_context& context)
      : boost::asio::execution_context::service(context), registry_(std::make_shared<registry>()) {}

  const std::shared_ptr<registry>& shared_registry() const noexcept { return registry_; }

 private:
  void shutdown() override {
    std::set<entry*> abandoned;
    {
      std::lock_guard lock(registry_->mutex);
      registry_->shut_down = true;
      registry_->shut_down_seen.store(true, std::memory_order_release);
      abandoned.swap(registry_->live);
    }
    for (entry* item : abandoned) item->abandon();
  }

  std::shared_ptr<registry> registry_;
};

// The registry of `context`, remembered per thread: use_service locks the context's service list and
// searches it, a cost every op would pay. A remembered registry whose context has shut down is looked up
// again (another context may live at the same address now).
inline std::shared_ptr<pending_handlers::registry> registry_of(boost::asio::execution_context& context) {
  thread_local boost::asio::execution_context* remembered_context = nullptr;
  thread_local std::shared_ptr<pending_handlers::registry> remembered;
  if (remembered_context != &context || !remembered || remembered->shut_down_flag()) {
    remembered = boost::asio::use_service<pending_handlers>(context).shared_registry();
    remembered_context = &context;
  }
  return remembered;
}

// Deliver is called as deliver(Handler&&, error_code, bytes) on the handler's executor; it turns ferry's
// (error, bytes) into the operation's completion signature.
template <class Handler, class Deliver>
class handler_completion final : public completion, public pending_handlers::entry {
  using executor_type = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
  using work_type = std::decay_t<decltype(boost::asio::prefer(std::declval<executor_type>(),
                                                              boost::asio::execution::outstanding_work.tracked))>;

 public:
  handler_completion(Handler handler, const boost::asio::any_io_executor& fallback, Deliver deliver)
      : executor_(boost::asio::get_associated_executor(handler, fallback)),
        registry_(registry_of(boost::asio::query(executor_, boost::asio::execution::context))),
        handler_(std::move(handler)),
        work_(boost::asio::prefer(executor_, boost::asio::execution::outstanding_work.tracked)),
        deliver_(std::move(deliver)) {
    std::lock_guard lock(registry_->mutex);
    registry_->live.insert(this);
  }

  ~handler_completion() override {
    std::lock_guard lock(registry_->mutex);
    registry_->live.erase(this);
  }

  void complete(boost::system::error_code error, std::size_t bytes) override {
    std::lock_guard lock(registry_->mutex);
    // Gone from the registry: the context shut down and destroyed the handler already.
    if (registry_->live.erase(this) == 0) return;
    // Posting under the registry's lock: a shutdown waits for this post to finish, and the scheduler,
    // shut down after this service, then destroys the posted handler if it never runs.
    boost::asio::post(executor_, [handler = std::move(*handler_), work = std::move(*work_), deliver = std::move(deliver_),
                                  error, bytes]() mutable {
      // The slot belongs to the handler; it is cleared on the handler's executor before the handler runs.
      boost::asio::get_associated_cancellation_slot(handler).clear();
      deliver(std::move(handler), error, bytes);
      (void)work;
    });
    handler_.reset();
    work_.reset();
  }

  void abandon() noexcept override {
    handler_.reset();
    work_.reset();
  }

 private:
  executor_type executor_;
  std::shared_ptr<pending_handlers::registry> registry_;
  std::optional<Handler> handler_;
  std::optional<work_type> work_;
  Deliver deliver_;
};

}  // namespace ferry::detail
