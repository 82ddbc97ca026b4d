// The bridge from ferry's operations back to Asio: a handler, held until the op completes, then posted
// to its associated executor (never run inside the initiating call), exactly once, with the executor's
// outstanding work tracked meanwhile. If the handler's execution context shuts down first (its
// io_context destroyed with ops in flight), the handler is destroyed there, as Asio destroys its own
// pending handlers, and the completion that arrives later is dropped.
//
// Keeping the executor awake: on a virtual machine a thread parked for a millisecond takes 25 us (median;
// 250 us at the 99th percentile, bench/host_timers on the H200) to run again after it is woken, which is
// what an io_context thread pays when ferry posts a completion to it. While completions are owed to an
// io_context, the engine keeps one of its threads running: a small task that re-queues itself (defer, so
// other handlers and the reactor run in between) until nothing is owed, or until `spin` has passed
// without a submission or completion there. It is the counterpart of the driver's own spin-wait in
// cuStreamSynchronize; engine_options::executor_spin sets it (zero: never).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>
#include <type_traits>
#include <utility>

#include "ferry/detail/operation.hpp"
#include "ferry/detail/stage_trace.hpp"

namespace ferry::detail {

// Per execution context: the completions ferry still owes there.
class pending_handlers : public boost::asio::execution_context::service {
 public:
  struct registry;
  struct entry {
    virtual void abandon() noexcept = 0;

   protected:
    ~entry() = default;

   private:
    friend struct registry;
    // Links of the registry's list of live entries (under its mutex): no allocation per op.
    entry* previous_ = nullptr;
    entry* next_ = nullptr;
    bool linked_ = false;
  };
  struct registry {
    std::mutex mutex;
    entry* live = nullptr;  // the first of the live entries (under mutex)
    bool shut_down = false;  // under mutex
    std::atomic<bool> shut_down_seen{false};  // the same, readable without the mutex
    bool shut_down_flag() const noexcept { return shut_down_seen.load(std::memory_order_acquire); }
    // Keeping the context awake (io_contexts only; see the top of this file).
    std::atomic<std::size_t> owed{0};              // completions still owed here by ops that keep it awake
    std::atomic<bool> kept_awake{false};           // a keep_awake task is queued or running
    std::atomic<std::int64_t> last_activity{0};    // steady_clock ticks of the last submission or completion
    std::atomic<std::uint64_t> posted{0};          // completions posted here so far (ends a keep_awake turn)
    std::atomic<std::size_t> posted_not_run{0};    // posted completions whose handler has not finished

    // A completion handed straight to a waiting keep_awake turn (see keep_awake), run there.
    struct delivery {
      virtual ~delivery() = default;
      virtual void run() = 0;
      delivery* next = nullptr;
      // A completion posted earlier had not run when this one was handed over: this one must run after
      // it, so it is posted too (behind it) rather than run in the turn.
      bool behind_posted = false;
    };
    // The deliveries handed to the current turn: a stack whose head is closed() while no turn waits.
    static delivery* closed() noexcept { return reinterpret_cast<delivery*>(std::uintptr_t{1}); }
    std::atomic<delivery*> mailbox{closed()};
    std::atomic<std::size_t> handed_over{0};  // completions a turn took from the mailbox (a diagnostic)
    bool mailbox_open() const noexcept { return mailbox.load(std::memory_order_acquire) != closed(); }
    // Hands `item` to the waiting turn; false (the caller keeps it) when no turn waits.
    bool try_hand(delivery* item) noexcept {
      delivery* head = mailbox.load(std::memory_order_acquire);
      do {
        if (head == closed()) return false;
        item->next = head;
      } while (!mailbox.compare_exchange_weak(head, item, std::memory_order_acq_rel, std::memory_order_acquire));
      return true;
    }

    // Under mutex.
    void link(entry* item) noexcept {
      item->previous_ = nullptr;
      item->next_ = live;
      if (live) live->previous_ = item;
      live = item;
      item->linked_ = true;
    }
    // Returns false when `item` was not linked (a shutdown took it already).
    bool unlink(entry* item) noexcept {
      if (!item->linked_) return false;
      if (item->previous_) item->previous_->next_ = item->next_;
      else live = item->next_;
      if (item->next_) item->next_->previous_ = item->previous_;
      item->previous_ = item->next_ = nullptr;
      item->linked_ = false;
      return true;
    }
    std::vector<entry*> unlink_all() {
      std::vector<entry*> all;
      while (live) {
        all.push_back(live);
        unlink(live);
      }
      return all;
    }
  };

  using key_type = pending_handlers;
  static inline boost::asio::execution_context::id id;

  explicit pending_handlers(boost::asio::execution_context& context)
      : boost::asio::execution_context::service(context), registry_(std::make_shared<registry>()) {}

  const std::shared_ptr<registry>& shared_registry() const noexcept { return registry_; }

 private:
  void shutdown() override {
    std::vector<entry*> abandoned;
    {
      std::lock_guard lock(registry_->mutex);
      registry_->shut_down = true;
      registry_->shut_down_seen.store(true, std::memory_order_release);
      abandoned = registry_->unlink_all();
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

// The execution context of an executor of either of Asio's models: a standard executor (query) or a
// Networking TS one such as io_context::strand (context()).
template <class Executor>
boost::asio::execution_context& context_of(const Executor& executor) {
  if constexpr (boost::asio::execution::is_executor<Executor>::value) {
    return boost::asio::query(executor, boost::asio::execution::context);
  } else {
    return executor.context();
  }
}

// Outstanding work on an executor of either of Asio's models, chosen as Asio's own handler_work chooses:
// a standard executor (asio::strand over one too) counts it through the outstanding_work.tracked
// property, a Networking TS executor (io_context::strand) through on_work_started / on_work_finished.
template <class Executor, class = void>
struct tracked_work {
  using type = boost::asio::executor_work_guard<Executor>;
  static type start(const Executor& executor) { return type(executor); }
};
template <class Executor>
struct tracked_work<Executor, std::enable_if_t<boost::asio::execution::is_executor<Executor>::value>> {
  using type = std::decay_t<decltype(boost::asio::prefer(std::declval<Executor>(),
                                                         boost::asio::execution::outstanding_work.tracked))>;
  static type start(const Executor& executor) {
    return boost::asio::prefer(executor, boost::asio::execution::outstanding_work.tracked);
  }
};

// Whether handlers of `executor` may run on any thread of its io_context, in any handler there (no strand).
template <class Executor>
bool runs_freely_on_io_context(const Executor& executor) {
  using plain = boost::asio::io_context::executor_type;
  using tracked = std::decay_t<decltype(boost::asio::prefer(std::declval<plain>(),
                                                            boost::asio::execution::outstanding_work.tracked))>;
  if constexpr (std::is_same_v<Executor, plain> || std::is_same_v<Executor, tracked>) {
    return true;
  } else if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    return executor.template target<plain>() != nullptr || executor.template target<tracked>() != nullptr;
  } else {
    return false;
  }
}

// Whether `executor` runs handlers on an io_context's threads (directly, type-erased, or through a strand).
// Only those are kept awake: other executors (a thread pool, use_future's, which runs work in place)
// have no parked thread to spare a wake-up, or would run the task inline.
template <class Executor>
bool runs_on_io_context(const Executor& executor) {
  if constexpr (requires { executor.get_inner_executor(); }) {
    return runs_on_io_context(executor.get_inner_executor());  // a strand
  } else {
    return runs_freely_on_io_context(executor);
  }
}

inline std::int64_t steady_ticks() noexcept { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// A spin-wait's pause: tells the core a thread is spinning (x86), so the other hyperthread runs freely.
inline void spin_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Deliveries taken from a mailbox, oldest first; those not run are destroyed with it (their handlers
// destroyed, as Asio destroys handlers it never ran).
class delivery_list {
  using delivery = pending_handlers::registry::delivery;

 public:
  // `stack`: newest first, as the mailbox holds them.
  explicit delivery_list(delivery* stack) noexcept {
    while (stack != nullptr) {
      delivery* next = stack->next;
      stack->next = first_;
      first_ = stack;
      stack = next;
    }
  }
  delivery_list(delivery_list&& other) noexcept : first_(std::exchange(other.first_, nullptr)) {}
  delivery_list& operator=(delivery_list&&) = delete;
  ~delivery_list() {
    while (first_ != nullptr) delete std::exchange(first_, first_->next);
  }
  bool empty() const noexcept { return first_ == nullptr; }
  // Runs them in order; if one throws, the rest stay in the list.
  void run_all() {
    while (first_ != nullptr) {
      std::unique_ptr<delivery> item(std::exchange(first_, first_->next));
      item->run();
    }
  }
  // Runs them in order up to the first that must follow a posted completion; the rest stay in the list.
  void run_until_behind_posted() {
    while (first_ != nullptr && !first_->behind_posted) {
      std::unique_ptr<delivery> item(std::exchange(first_, first_->next));
      item->run();
    }
  }

 private:
  delivery* first_ = nullptr;
};

// The task that keeps a thread of an io_context running while completions are owed there.
template <class Executor>
struct keep_awake {
  // How long one turn of the task waits in place for a completion before it gives the thread back to
  // the io_context's other handlers. Waiting in place rather than re-queuing at once: an io thread
  // looping through its scheduler holds the scheduler's mutex much of the time, and the completion's
  // post from the engine's thread then waits for that mutex (microseconds on the H200's host).
  static constexpr std::chrono::microseconds turn{20};
  // How long after the last submission or completion a turn looks for a completion often (see below).
  static constexpr std::chrono::microseconds fine_look_window{50};

  std::shared_ptr<pending_handlers::registry> owner;
  Executor executor;
  std::chrono::steady_clock::duration spin;

  bool wanted() const noexcept {
    return owner->owed.load() > 0 && !owner->shut_down_flag() &&
           steady_ticks() - owner->last_activity.load() < static_cast<std::int64_t>(spin.count());
  }
  // One turn: waits for a completion (handed to the mailbox, or posted), then runs what was handed over,
  // after re-queuing itself (or stopping) first, so that a handler that throws leaves the task in a
  // consistent state.
  void operator()() {
    const std::uint64_t posted = owner->posted.load(std::memory_order_acquire);
    const std::int64_t turn_begins = steady_ticks();
    const std::int64_t turn_ends =
        turn_begins + std::chrono::duration_cast<std::chrono::steady_clock::duration>(turn).count();
    // Right after a submission or completion another is likely soon: look often then (see the loop).
    const bool recent = turn_begins - owner->last_activity.load() <
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(fine_look_window).count();
    owner->mailbox.store(nullptr, std::memory_order_release);  // open: one turn runs at a time
    // Ends early when a completion was posted (now, or before the turn began and not yet run: it waits
    // in the queue behind this task). Within fine_look_window of the last activity a look is three loads
    // and two pauses (~40 ns on the H200's host), so that a handed-over completion runs soon after it
    // arrives (16 pauses and two clock reads between looks: ~0.35 us, half of which a completion waited
    // on average); later, 16 pauses, leaving more of the core to what shares it. The clock and wanted()
    // (~40 ns a clock read) are looked at every 16th time only.
    const int pauses = recent ? 2 : 16;
    for (unsigned look = 1; owner->mailbox.load(std::memory_order_acquire) == nullptr &&
                            owner->posted.load(std::memory_order_acquire) == posted &&
                            owner->posted_not_run.load(std::memory_order_acquire) == 0;
         ++look) {
      if (look % 16 == 0 && (steady_ticks() >= turn_ends || !wanted())) break;
      for (int i = 0; i < pauses; ++i) spin_pause();
    }
    delivery_list handed(owner->mailbox.exchange(pending_handlers::registry::closed(), std::memory_order_acq_rel));
    if (!handed.empty()) stage_trace::mark(stage_trace::stage::mailbox_taken);
    const Executor here = executor;
    reschedule();  // moves *this away
    auto post_rest = [&] {
      if (!handed.empty()) boost::asio::post(here, [rest = std::move(handed)]() mutable { rest.run_all(); });
    };
    try {
      // Those handed over behind a posted completion (its op finished first) go behind it in the queue.
      handed.run_until_behind_posted();
    } catch (...) {
      // As if each had been posted: the exception leaves io_context::run, the others still run.
      post_rest();
      throw;
    }
    post_rest();
  }

 private:
  void reschedule() {
    while (true) {
      if (wanted()) {
        boost::asio::defer(executor, std::move(*this));
        return;
      }
      owner->kept_awake.store(false);
      // An op that arrived between the check and the store saw the flag set and started no task: look
      // again, and take the task back unless another one started meanwhile.
      if (!wanted() || owner->kept_awake.exchange(true)) return;
    }
  }
};

// Deliver is called as deliver(Handler&&, error_code, bytes) on the handler's executor; it turns ferry's
// (error, bytes) into the operation's completion signature.
template <class Handler, class Deliver>
class handler_completion final : public completion, public pending_handlers::entry {
  using executor_type = boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;
  using work_type = typename tracked_work<executor_type>::type;
  using io_work_type = typename tracked_work<boost::asio::any_io_executor>::type;

 public:
  // `io_executor`: the engine's (the I/O executor, also the handler's when it has none of its own).
  // Work is counted on both until the handler has run, as Asio's own operations do, so that neither
  // io_context's run() returns while the op is pending. `spin`: how long the handler's io_context is
  // kept awake without activity (zero: not at all).
  handler_completion(Handler handler, const boost::asio::any_io_executor& io_executor, Deliver deliver,
                     std::chrono::microseconds spin)
      : executor_(boost::asio::get_associated_executor(handler, io_executor)),
        registry_(registry_of(context_of(executor_))),
        handler_(std::move(handler)),
        work_(tracked_work<executor_type>::start(executor_)),
        io_work_(tracked_work<boost::asio::any_io_executor>::start(io_executor)),
        deliver_(std::move(deliver)) {
    {
      std::lock_guard lock(registry_->mutex);
      registry_->link(this);
    }
    if (spin.count() > 0 && runs_on_io_context(executor_)) {
      if (runs_freely_on_io_context(executor_)) {
        // Made here, at submission, rather than on the completion's way to the handler; the thread that
        // completes the op has it in its cache by then (prefetch()).
        spare_delivery_ = std::make_unique<delivery_of>();
      }
      kept_awake_.store(true);
      registry_->owed.fetch_add(1);
      registry_->last_activity.store(steady_ticks());
      if (!registry_->kept_awake.exchange(true)) {
        boost::asio::post(executor_, keep_awake<executor_type>{registry_, executor_, spin});
      }
    }
  }

  ~handler_completion() override {
    no_longer_owed();
    std::lock_guard lock(registry_->mutex);
    registry_->unlink(this);
  }

  void complete(boost::system::error_code error, std::size_t bytes) override {
    stage_trace::mark(stage_trace::stage::completion_begins);
    post_handler(error, bytes);
    registry_->posted.fetch_add(1, std::memory_order_release);
    // After the post: the kept-awake thread is still running when the handler reaches its queue.
    no_longer_owed();
  }

  void prefetch() const noexcept override {
    prefetch_for_write(this, sizeof(*this));
    prefetch_for_write(&registry_->mutex, 64);
    if (spare_delivery_) prefetch_for_write(spare_delivery_.get(), sizeof(delivery_of));
  }

  void abandon() noexcept override {
    no_longer_owed();
    handler_.reset();
    work_.reset();
    io_work_.reset();
  }

 private:
  void post_handler(boost::system::error_code error, std::size_t bytes) {
    std::lock_guard lock(registry_->mutex);
    // Gone from the registry: the context shut down and destroyed the handler already.
    if (!registry_->unlink(this)) return;
    bound_handler run{std::move(*handler_), std::move(*work_), std::move(*io_work_), std::move(deliver_), error, bytes};
    handler_.reset();
    work_.reset();
    io_work_.reset();
    // A kept-awake thread of the handler's io_context waiting in a keep_awake turn runs it there, without
    // a trip through the scheduler (a plain io_context executor only: a strand's handlers must go
    // through the strand).
    if (spare_delivery_ && kept_awake_.load() && registry_->mailbox_open()) {
      std::unique_ptr<delivery_of> item = std::move(spare_delivery_);
      item->bound.emplace(std::move(run));
      item->behind_posted = registry_->posted_not_run.load(std::memory_order_acquire) > 0;
      if (registry_->try_hand(item.get())) {
        (void)item.release();
        stage_trace::mark(stage_trace::stage::handed_to_mailbox);
        registry_->handed_over.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      post_counted([item = std::move(item)] { item->run(); });  // the turn ended meanwhile
      return;
    }
    post_counted(std::move(run));
  }

  // The handler with its result, as it is posted or handed to a keep_awake turn.
  // The handler's cancellation slot is left as the initiation set it: the slot is its owner's (a
  // parallel group may emit into it from another thread at any time), and the cancellation handler
  // ferry installed stays harmless once the op has completed (it holds the op weakly, and a completed
  // op ignores requests), as Asio's own operations leave theirs.
  struct bound_handler {
    Handler handler;
    work_type work;
    std::optional<io_work_type> io_work;
    Deliver deliver;
    boost::system::error_code error;
    std::size_t bytes;
    void operator()() {
      stage_trace::mark(stage_trace::stage::handler_runs);
      deliver(std::move(handler), error, bytes);
      // Released after the handler has run: the I/O executor's run() does not return before it.
      io_work.reset();
    }
  };

  // Posting under the registry's lock: a shutdown waits for this post to finish, and the scheduler,
  // shut down after this service, then destroys the posted handler if it never runs.
  template <class Run>
  void post_counted(Run run) {
    registry_->posted_not_run.fetch_add(1, std::memory_order_acq_rel);
    boost::asio::post(executor_, [run = std::move(run), not_run = counted_post{registry_}]() mutable { run(); });
  }

  struct delivery_of final : pending_handlers::registry::delivery {
    void run() override { (*bound)(); }
    std::optional<bound_handler> bound;
  };

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

  void no_longer_owed() noexcept {
    if (kept_awake_.exchange(false)) {  // complete() and a shutdown's abandon() may race
      registry_->last_activity.store(steady_ticks());
      registry_->owed.fetch_sub(1);
    }
  }

  executor_type executor_;
  std::shared_ptr<pending_handlers::registry> registry_;
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
