// The bridge from ferry's operations back to Asio: a handler, held until the op completes, then posted
// to its associated executor (never run inside the initiating call), exactly once, with outstanding work
// tracked on the handler's executor and the engine's meanwhile. Where Asio's dispatch would run it in
// place, on the thread that completes the op, it runs there (in_place_completions). If
// the handler's execution context shuts down first (its io_context destroyed with ops in flight), the
// handler is destroyed there, as Asio destroys its own pending handlers, and the completion that
// arrives later is dropped.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "ferry/detail/keep_awake.hpp"
#include "ferry/detail/op_blocks.hpp"
#include "ferry/detail/operation.hpp"
#include "ferry/detail/pending_handlers.hpp"

namespace ferry::detail {

// Deliver is called as deliver(Handler&&, error_code, bytes) on the handler's executor; it turns ferry's
// (error, bytes) into the operation's completion signature.
template <class Handler, class Deliver>
class handler_completion final : public completion, public pending_handlers::entry {
  using executor_type = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
  using work_type = typename tracked_work<executor_type>::type;
  using io_work_type = typename tracked_work<boost::asio::any_io_executor>::type;

 public:
  // `io_executor`: the engine's (the I/O executor, also the handler's when it has none of its own).
  // Work is counted on both, as Asio's own operations do, so that neither io_context's run() returns
  // while the op is pending; once when both are of one execution context (the common case: each count
  // is an atomic write to the scheduler's busiest line). The I/O executor's count ends when the handler
  // is handed to its executor, the handler's own after it has run. `awake`: how long the handler's
  // io_context is kept awake without activity (keep_awake.hpp; a spin of zero: not at all).
  handler_completion(Handler handler, const boost::asio::any_io_executor& io_executor, Deliver deliver,
                     awake_times awake)
      : executor_(boost::asio::get_associated_executor(handler, io_executor)),
        runs_in_place_(runs_in_place_anywhere(executor_)),
        registry_(registry_of(context_of(executor_))),
        handler_(std::move(handler)),
        work_(tracked_work<executor_type>::start(executor_)),
        deliver_(std::move(deliver)) {
    if (&context_of(io_executor) != &context_of(executor_)) {
      io_work_.emplace(tracked_work<boost::asio::any_io_executor>::start(io_executor));
    }
    if (awake.spin.count() > 0 && runs_on_io_context(executor_)) {
      if (runs_freely_on_io_context(executor_)) {
        // Made here, at submission, rather than on the completion's way to the handler; the thread that
        // completes the op has it in its cache by then (prefetch()).
        spare_delivery_ = std::make_unique<delivery_of>();
      }
      kept_awake_.store(true);
      registry_->owed.fetch_add(1);
      registry_->last_activity.store(steady_ticks());
      registry_->linger.store(std::chrono::duration_cast<std::chrono::steady_clock::duration>(awake.linger).count(),
                              std::memory_order_relaxed);
      if (!registry_->kept_awake.exchange(true)) {
        boost::asio::post(executor_, keep_awake<executor_type>{registry_, executor_, awake.spin});
      }
    }
  }

  ~handler_completion() override {
    no_longer_owed();
    // Unlinked already when the op completed (the usual case), or by a shutdown that abandoned the handler
    // while it held the op: then the lock's line, which the completing thread wrote last, stays off the way
    // to the handler that this destruction precedes.
    if (!linked()) return;
    // An op destroyed with its handler still registered (it never completed, or a shutdown found it being
    // destroyed): the handler goes here, before a shutdown of its context ends.
    std::unique_lock lock(registry_->mutex);
    registry_->unlink(this);
    registry_->delivering.fetch_add(1, std::memory_order_acq_rel);
    lock.unlock();
    delivering_count destroying{registry_.get()};
    handler_.reset();
    work_.reset();
    io_work_.reset();
  }

  void complete(boost::system::error_code error, std::size_t bytes) override {
    // The lock covers taking the handler from the registry only, not its way to the executor: the threads
    // that start ops take it too (to register theirs), and would wait for a post's scheduler lock and the
    // wake-up of a parked thread.
    std::unique_lock lock(registry_->mutex);
    std::optional<bound_handler> run = take_handler(error, bytes);
    if (run) registry_->delivering.fetch_add(1, std::memory_order_acq_rel);
    lock.unlock();
    if (!run) {
      no_longer_owed();
      return;
    }
    // Until it ends, a shutdown of the handler's context waits: the executor may be asked where it runs,
    // and posted to (once its context has shut down, an io_context's executor refers to a destroyed one).
    delivering_count delivering{registry_.get()};
    if (in_place_completions::allowed() && (runs_in_place_ || runs_freely_on_this_thread(executor_))) {
      io_work_.reset();
      delivering.end();  // the handler may destroy its own io_context, which would wait for this
      run_here(std::move(*run));
      return;
    }
    hand_over(std::move(*run));
    // The I/O executor's work ends once the handler is handed to its own executor, as Asio's operations
    // release theirs: not after the handler has run, since by then its owner may have destroyed that
    // io_context (a handler that wakes a thread which tears down the engine and its io_context).
    io_work_.reset();
    delivering.end();
    // After the post: the kept-awake thread is still running when the handler reaches its queue.
    no_longer_owed();
  }

  void prefetch() const noexcept override {
    prefetch_for_write(this, sizeof(*this));
    prefetch_for_write(&registry_->mutex, 64);
    if (spare_delivery_) prefetch_for_write(spare_delivery_.get(), sizeof(delivery_of));
  }

  // Registers the handler with its context. `owner`: the op that holds this completion, which a shutdown
  // of the context holds while it destroys the handler (hold()); none where the completion is held
  // otherwise (ferry::remote's, or a test's driving one by hand), and then a shutdown destroys the handler
  // at once. The handler, once handed to its executor, keeps the op alive until it has run: the op is
  // then freed on the thread that runs handlers (in a coroutine's case, the thread that allocated it),
  // not on the thread that learnt of the completion. Freeing on another thread than the allocating one
  // makes each op's memory travel between the threads' caches.
  void enlist(const std::shared_ptr<operation>& owner) noexcept {
    std::lock_guard lock(registry_->mutex);
    owner_ = owner;
    owned_ = owner != nullptr;
    registry_->link(this);
  }

  std::shared_ptr<void> hold() const noexcept override {
    // Not owned by an op: a pointer that holds nothing (the aliasing constructor, no allocation).
    if (!owned_) return std::shared_ptr<void>(std::shared_ptr<void>(), const_cast<handler_completion*>(this));
    return owner_.lock();
  }

  void abandon() noexcept override {
    no_longer_owed();
    handler_.reset();
    work_.reset();
    io_work_.reset();
  }

 private:
  // The handler with its result, as it is posted or handed to a keep_awake turn.
  // The handler's cancellation slot is left as the initiation set it: the slot is its owner's (a
  // parallel group may emit into it from another thread at any time), and the cancellation handler
  // ferry installed stays harmless once the op has completed (it holds the op weakly, and a completed
  // op ignores requests), as Asio's own operations leave theirs.
  struct bound_handler {
    std::shared_ptr<operation> owner;  // first: released last, after the handler's members
    Handler handler;
    work_type work;
    Deliver deliver;
    boost::system::error_code error;
    std::size_t bytes;
    void operator()() {
      // The op goes once the handler returns (unless the engine still holds it), here on the handler's
      // thread. Not before the handler: freeing it writes lines that the thread which started the op wrote
      // last (its block's free list, the count of the registry's owners), a wait that the handler, whose
      // caller waits for it, would pay.
      Handler running = std::move(handler);
      deliver(std::move(running), error, bytes);
      owner.reset();
    }
  };

  // The handler run on this thread, outside the registry's lock (the handler may start ops, which take
  // it): an io_context's own handler from inside that io_context's run as it is, any other through
  // asio::dispatch, which runs it in place with the executor's own rules (use_future's stores an
  // exception in the future; system_executor's ends the process, as Asio does for it).
  void run_here(bound_handler run) {
    no_longer_owed();
    const in_place_completions nested(false);
    if (runs_in_place_) {
      boost::asio::dispatch(executor_, std::move(run));
    } else {
      run();
    }
  }

  // Under the registry's lock: the handler with its result, taken out of this completion; none when the
  // handler is gone from the registry (its context shut down and destroyed it already).
  std::optional<bound_handler> take_handler(boost::system::error_code error, std::size_t bytes) {
    if (!registry_->unlink(this)) return std::nullopt;
    std::optional<bound_handler> run(
        bound_handler{owner_.lock(), std::move(*handler_), std::move(*work_), std::move(deliver_), error, bytes});
    handler_.reset();
    work_.reset();
    return run;
  }

  // Counts a posted completion until its handler has run or been destroyed (see keep_awake's order).
  struct counted_post {
    std::shared_ptr<pending_handlers::registry> registry;
    counted_post(std::shared_ptr<pending_handlers::registry> owner) : registry(std::move(owner)) {}
    counted_post(counted_post&& other) noexcept : registry(std::move(other.registry)) {}
    counted_post& operator=(counted_post&&) = delete;
    ~counted_post() {
      if (registry) registry->posted_not_run.fetch_sub(1, std::memory_order_acq_rel);
    }
  };

  // What is posted: a completion's run, counted as posted until it has run or been destroyed. Its
  // allocator is ferry's reused blocks (op_blocks.hpp: the scheduler's record of it is made on the thread
  // that completes the op and freed on the one that runs the handler), and it names no executor of its
  // own, so that Asio queues it as it is: a handler that names one (a lambda under bind_allocator does)
  // is queued inside a work_dispatcher, which on the io thread hands it to the executor again through
  // the type-erased executor, an allocation and a work count more per completion.
  template <class Run>
  struct posted_run {
    using allocator_type = op_blocks::allocator<void>;
    allocator_type get_allocator() const noexcept { return {}; }
    Run run;
    counted_post not_run;
    void operator()() { run(); }
  };

  // A waiting keep_awake turn ends once `posted` moves (a completion handed to its mailbox ends it
  // there). An io_context's own executor is posted to as its concrete type, not through any_io_executor.
  template <class Run>
  void post_counted(Run run) {
    registry_->posted_not_run.fetch_add(1, std::memory_order_acq_rel);
    posted_run<Run> posted{std::move(run), counted_post{registry_}};
    if (boost::asio::io_context* io = plain_io_context(executor_)) {
      boost::asio::post(io->get_executor(), std::move(posted));
    } else {
      boost::asio::post(executor_, std::move(posted));
    }
    registry_->posted.fetch_add(1, std::memory_order_release);
  }

  struct delivery_of final : pending_handlers::registry::delivery {
    void run() override { (*bound)(); }
    std::optional<bound_handler> bound;
  };

  // A kept-awake thread of the handler's io_context waiting in a keep_awake turn runs it there, without
  // a trip through the scheduler (a plain io_context executor only: a strand's handlers must go through
  // the strand); else it is posted. While `delivering` is counted.
  void hand_over(bound_handler run) {
    if (spare_delivery_ && kept_awake_.load() && registry_->mailbox_open()) {
      std::unique_ptr<delivery_of> item = std::move(spare_delivery_);
      item->bound.emplace(std::move(run));
      item->behind_posted = registry_->posted_not_run.load(std::memory_order_acquire) > 0;
      if (registry_->try_hand(item.get())) {
        (void)item.release();
        registry_->handed_over.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      post_counted([item = std::move(item)] { item->run(); });  // the turn ended meanwhile
      return;
    }
    post_counted(std::move(run));
  }

  // The registry's count of completions on their way (see pending_handlers::registry::delivering).
  class delivering_count {
   public:
    explicit delivering_count(pending_handlers::registry* counted) noexcept : counted_(counted) {}
    delivering_count(const delivering_count&) = delete;
    delivering_count& operator=(const delivering_count&) = delete;
    ~delivering_count() { end(); }
    void end() noexcept {
      if (counted_) std::exchange(counted_, nullptr)->delivering.fetch_sub(1, std::memory_order_acq_rel);
    }

   private:
    pending_handlers::registry* counted_;
  };

  void no_longer_owed() noexcept {
    if (kept_awake_.exchange(false)) {  // complete() and a shutdown's abandon() may race
      registry_->last_activity.store(steady_ticks());
      registry_->owed.fetch_sub(1);
    }
  }

  executor_type executor_;
  bool runs_in_place_;  // asio::dispatch would run the handler on any thread (runs_in_place_anywhere)
  std::shared_ptr<pending_handlers::registry> registry_;
  std::weak_ptr<operation> owner_;
  bool owned_ = false;  // owner_ was given (enlist)
  std::optional<Handler> handler_;
  std::optional<work_type> work_;
  std::optional<io_work_type> io_work_;
  Deliver deliver_;
  std::atomic<bool> kept_awake_{false};  // counted in registry_->owed
  // Where the completion goes when it is handed to a keep_awake turn; only for handlers that may run in
  // one (their executor is the io_context's own).
  std::unique_ptr<delivery_of> spare_delivery_;
};

}  // namespace ferry::detail
