// What ferry owes each execution context: the handlers of ops still in flight there (destroyed, as Asio
// destroys its own pending handlers, if the context shuts down first), and the state of keeping one of
// its threads awake (keep_awake.hpp). Also the executor helpers that work with either of Asio's executor
// models (standard and Networking TS).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/detail/op_blocks.hpp"
#include "ferry/detail/prefetch.hpp"

namespace ferry::detail {

// Per execution context: the completions ferry still owes there.
class pending_handlers : public boost::asio::execution_context::service {
 public:
  struct registry;
  struct entry {
    // Destroys the handler (a shutdown's), while `hold()` keeps the entry alive.
    virtual void abandon() noexcept = 0;
    // What keeps the entry alive (its op); empty once the op is being destroyed, on another thread.
    virtual std::shared_ptr<void> hold() const noexcept = 0;

   protected:
    ~entry() = default;
    // Whether the entry is in the registry's list. Readable without the mutex: an entry leaves the list
    // once (its completion or a shutdown takes it), and what reads false after that has heard of it.
    bool linked() const noexcept { return linked_.load(std::memory_order_acquire); }

   private:
    friend struct registry;
    // Links of the registry's list of live entries (under its mutex): no allocation per op.
    entry* previous_ = nullptr;
    entry* next_ = nullptr;
    std::atomic<bool> linked_{false};
    bool left_by_shutdown_ = false;  // under the mutex: a shutdown could not hold it (see unlink_all_held)
  };
  // The members sit on cache lines by who writes them and when, so that a thread reading one group is not
  // robbed of its line by writes to another: each op's submission and completion write the lock's line
  // and the keep-awake counts, every submission reads the shutdown flag, and a waiting keep_awake turn
  // spins on the line of what its completions write.
  struct registry {
    std::mutex mutex;
    entry* live = nullptr;  // the first of the live entries (under mutex)
    bool shut_down = false;  // under mutex
    alignas(64) std::atomic<bool> shut_down_seen{false};  // the same, readable without the mutex
    bool shut_down_flag() const noexcept { return shut_down_seen.load(std::memory_order_acquire); }
    // Asks for the lines an op's submission writes here (the lock's, the keep-awake counts'), which the
    // thread that completed the op before it wrote last.
    void prefetch_for_submission() const noexcept {
      prefetch_for_write(&mutex, sizeof(mutex));
      prefetch_for_write(&owed, sizeof(owed));
    }
    // Keeping the context awake (io_contexts only; see the top of this file).
    alignas(64) std::atomic<std::size_t> owed{0};  // completions still owed here by ops that keep it awake
    std::atomic<bool> kept_awake{false};           // a keep_awake task is queued or running
    std::atomic<std::int64_t> last_activity{0};    // steady_clock ticks of the last submission or completion
    // steady_clock ticks a keep_awake task goes on once nothing is owed: the linger of the engine whose op
    // came last (its poller's spin after activity, which changes with the pauses between ops).
    std::atomic<std::int64_t> linger{0};
    std::atomic<std::size_t> handed_over{0};       // completions handed to a turn's mailbox (a diagnostic)
    // What a waiting turn watches.
    alignas(64) std::atomic<std::uint64_t> posted{0};  // completions posted here so far (ends a keep_awake turn)
    std::atomic<std::size_t> posted_not_run{0};        // posted completions whose handler has not finished
    // Handlers taken from the list and still on their way to the context's queue or a turn's mailbox, or
    // being destroyed by their op's destructor: a shutdown waits for them (a post must reach the
    // scheduler, which shuts down after this service and destroys what never ran; a handler's work guard
    // must go while its context lives), so that the mutex is not held across a post or a destructor.
    std::atomic<std::size_t> delivering{0};
    std::size_t left_by_shutdown = 0;  // under mutex: entries a shutdown left linked, until they leave

    // A completion handed straight to a waiting keep_awake turn (see keep_awake), run there.
    struct delivery {
      virtual ~delivery() = default;
      virtual void run() = 0;
      // Made for each op at submission and freed on the handler's thread: one of ferry's reused blocks,
      // as the op itself (engine_initiation.hpp).
      static void* operator new(std::size_t bytes) { return op_blocks::take(bytes); }
      static void operator delete(void* block, std::size_t bytes) noexcept { op_blocks::give_back(block, bytes); }
      delivery* next = nullptr;
      // A completion posted earlier had not run when this one was handed over: this one must run after
      // it, so it is posted too (behind it) rather than run in the turn.
      bool behind_posted = false;
    };
    // The deliveries handed to the current turn: a stack whose head is closed() while no turn waits.
    static delivery* closed() noexcept { return reinterpret_cast<delivery*>(std::uintptr_t{1}); }
    std::atomic<delivery*> mailbox{closed()};
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
      item->linked_.store(true, std::memory_order_relaxed);
    }
    // Returns false when `item` was not linked (a shutdown took it already).
    bool unlink(entry* item) noexcept {
      if (!item->linked_.load(std::memory_order_relaxed)) return false;
      if (std::exchange(item->left_by_shutdown_, false)) --left_by_shutdown;
      if (item->previous_) item->previous_->next_ = item->next_;
      else live = item->next_;
      if (item->next_) item->next_->previous_ = item->previous_;
      item->previous_ = item->next_ = nullptr;
      item->linked_.store(false, std::memory_order_release);
      return true;
    }
    // Under mutex: the live entries, each with what keeps it alive until its handler is abandoned. One
    // that cannot be held (its op is being destroyed on another thread) stays linked and counted in
    // left_by_shutdown until its destructor takes it out and destroys the handler.
    std::vector<std::pair<entry*, std::shared_ptr<void>>> unlink_all_held() {
      std::vector<std::pair<entry*, std::shared_ptr<void>>> all;
      for (entry* item = live; item != nullptr;) {
        entry* next = item->next_;
        if (std::shared_ptr<void> held = item->hold()) {
          unlink(item);
          all.emplace_back(item, std::move(held));
        } else if (!item->left_by_shutdown_) {
          item->left_by_shutdown_ = true;
          ++left_by_shutdown;
        }
        item = next;
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
  // Destroys the handlers still owed here, then waits for those on their way here or being destroyed
  // elsewhere: a completion that took its handler before the lock is posting it to this context, and an
  // op being destroyed on another thread destroys its own handler.
  void shutdown() override {
    std::vector<std::pair<entry*, std::shared_ptr<void>>> abandoned;
    {
      std::lock_guard lock(registry_->mutex);
      registry_->shut_down = true;
      registry_->shut_down_seen.store(true, std::memory_order_release);
      abandoned = registry_->unlink_all_held();
    }
    for (auto& [item, held] : abandoned) item->abandon();
    abandoned.clear();  // an op whose engine let it go is destroyed here
    while (true) {
      {
        std::lock_guard lock(registry_->mutex);
        if (registry_->left_by_shutdown == 0 && registry_->delivering.load(std::memory_order_acquire) == 0) return;
      }
      std::this_thread::yield();
    }
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

// `test` applied to the io_context executor that `executor` is (plain or work-tracking, directly or
// type-erased); false for any other executor (a strand, a thread pool's).
template <class Executor, class Test>
bool test_io_context_executor(const Executor& executor, Test test) {
  using plain = boost::asio::io_context::executor_type;
  using tracked = std::decay_t<decltype(boost::asio::prefer(std::declval<plain>(),
                                                            boost::asio::execution::outstanding_work.tracked))>;
  if constexpr (std::is_same_v<Executor, plain> || std::is_same_v<Executor, tracked>) {
    return test(executor);
  } else if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    if (const auto* io = executor.template target<plain>()) return test(*io);
    if (const auto* io = executor.template target<tracked>()) return test(*io);
    return false;
  } else {
    return false;
  }
}

// The io_context whose own executor `executor` is (plain or work-tracking, directly or type-erased); null
// for any other executor (a strand, a thread pool's).
template <class Executor>
boost::asio::io_context* plain_io_context(const Executor& executor) {
  boost::asio::io_context* found = nullptr;
  test_io_context_executor(executor, [&found](const auto& io) {
    found = &io.context();
    return true;
  });
  return found;
}

// Whether handlers of `executor` may run on any thread of its io_context, in any handler there (no strand).
template <class Executor>
bool runs_freely_on_io_context(const Executor& executor) {
  return plain_io_context(executor) != nullptr;
}

// Whether `executor` is an io_context's own (no strand) and the calling thread is running that io_context:
// a handler of it may run here at once.
template <class Executor>
bool runs_freely_on_this_thread(const Executor& executor) {
  return test_io_context_executor(executor, [](const auto& io) { return io.running_in_this_thread(); });
}

// Whether `executor` runs handlers on an io_context's threads (directly, type-erased, or through a strand).
// Only those are kept awake: other executors have no thread of the caller's to spare a wake-up (a thread
// pool's), or have their handlers run in place by the thread that completes the op (runs_in_place_anywhere).
template <class Executor>
bool runs_on_io_context(const Executor& executor) {
  if constexpr (requires { executor.get_inner_executor(); }) {
    return runs_on_io_context(executor.get_inner_executor());  // a strand
  } else {
    return runs_freely_on_io_context(executor);
  }
}

// The executor types of Asio's system context: system_executor with any properties, and use_future's.
template <class Executor>
struct is_system_context_executor : std::false_type {};
template <class Blocking, class Relationship, class Allocator>
struct is_system_context_executor<boost::asio::basic_system_executor<Blocking, Relationship, Allocator>>
    : std::true_type {};
template <class T, class Blocking>
struct is_system_context_executor<boost::asio::detail::promise_executor<T, Blocking>> : std::true_type {};

// Whether asio::dispatch runs work given to `executor` in place on whatever thread calls it: an executor of
// Asio's system context (system_executor, directly or type-erased; use_future's, which hands its work to
// the system context), which has no thread of its own to prefer.
template <class Executor>
bool runs_in_place_anywhere(const Executor& executor) {
  if constexpr (is_system_context_executor<Executor>::value) {
    return true;
  } else if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    return executor.template target<boost::asio::system_executor>() != nullptr;
  } else {
    return false;
  }
}

inline std::int64_t steady_ticks() noexcept { return std::chrono::steady_clock::now().time_since_epoch().count(); }

}  // namespace ferry::detail
