#include "examples/pipeline_server/buffer_pool.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;

namespace ferry::pipeline {

void free_host_memory::operator()(std::uint8_t* memory) const noexcept { std::free(memory); }

buffer_lease& buffer_lease::operator=(buffer_lease&& other) noexcept {
  buffer_lease old(std::move(*this));
  pool_ = other.pool_;
  pair_ = std::move(other.pair_);
  return *this;
}

buffer_lease::~buffer_lease() {
  if (pair_ && pool_) pool_->give_back(std::move(pair_));
}

buffer_pool::buffer_pool(std::size_t budget_bytes, context_ref context, host_buffer_hooks hooks)
    : budget_(budget_bytes), context_(context), hooks_(std::move(hooks)) {
  if (budget_bytes < class_of(1)) {
    throw std::invalid_argument("buffer_pool: budget_bytes is " + std::to_string(budget_bytes) +
                                ", below the smallest buffer class of " + std::to_string(class_of(1)) + " bytes");
  }
}

buffer_pool::~buffer_pool() {
  std::vector<std::unique_ptr<staging_pair>> all;
  for (auto& [size, pairs] : idle_) {
    for (auto& pair : pairs) all.push_back(std::move(pair));
  }
  release(std::move(all));
}

std::size_t buffer_pool::class_of(std::size_t bytes) noexcept {
  return std::bit_ceil(std::max<std::size_t>(bytes, 4096));
}

buffer_pool::occupancy buffer_pool::current() const {
  std::lock_guard lock(mutex_);
  return occupancy{leased_, idle_bytes_, budget_, waiters_.size()};
}

std::unique_ptr<staging_pair> buffer_pool::allocate(std::size_t class_bytes) {
  auto pair = std::make_unique<staging_pair>();
  pair->class_bytes = class_bytes;
  // Whole pages (see free_host_memory), not value-initialized: the socket writes them before anything
  // reads them.
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (class_bytes + checksum_slot_bytes + page - 1) / page * page;
  pair->host.reset(static_cast<std::uint8_t*>(std::aligned_alloc(page, rounded)));
  if (!pair->host) throw std::bad_alloc();
  context_guard in_context(context_);
  pair->device = device_buffer<std::uint8_t>::allocate(class_bytes + checksum_slot_bytes);
  if (hooks_.adopt) pair->stage_hold = hooks_.adopt(pair->host_span());
  return pair;
}

void buffer_pool::release(std::vector<std::unique_ptr<staging_pair>> pairs) noexcept {
  if (pairs.empty()) return;
  context_guard in_context(context_);
  for (auto& pair : pairs) {
    if (hooks_.before_free) hooks_.before_free(pair->host_span());
    pair.reset();
  }
}

void buffer_pool::wake_head() {
  if (waiters_.empty()) return;
  std::shared_ptr<waiter> head = waiters_.front();
  head->woken = true;
  // The timer belongs to the waiting coroutine's executor (its strand): touched only there. Moving its
  // expiry to the past wakes a wait already started and makes one not yet started return at once.
  asio::post(head->timer.get_executor(), [head] { head->timer.expires_at(asio::steady_timer::time_point::min()); });
}

bool buffer_pool::my_turn(const std::shared_ptr<waiter>& me, lease_turn turn) const {
  if (waiters_.empty() || waiters_.front() == me) return true;
  // A lease before new requests passes every waiter but those of its own turn, queued before it.
  return turn == lease_turn::before_new_requests && !me && waiters_.front()->turn != lease_turn::before_new_requests;
}

void buffer_pool::enqueue(std::shared_ptr<waiter> me) {
  auto at = waiters_.end();
  if (me->turn == lease_turn::before_new_requests) {
    at = std::find_if(waiters_.begin(), waiters_.end(),
                      [](const auto& w) { return w->turn != lease_turn::before_new_requests; });
  }
  waiters_.insert(at, std::move(me));
}

void buffer_pool::give_back(std::unique_ptr<staging_pair> pair) noexcept {
  std::lock_guard lock(mutex_);
  leased_ -= pair->class_bytes;
  idle_bytes_ += pair->class_bytes;
  try {
    idle_[pair->class_bytes].push_back(std::move(pair));
  } catch (...) {
    idle_bytes_ -= pair->class_bytes;  // could not keep it: freed here, by unique_ptr
  }
  wake_head();
}

asio::awaitable<buffer_lease> buffer_pool::acquire(std::size_t bytes, asio::cancellation_slot cancel,
                                                   std::function<bool()> given_up, lease_turn turn) {
  const std::size_t class_bytes = class_of(bytes);
  if (class_bytes > budget_) {
    throw std::invalid_argument("buffer_pool::acquire: " + std::to_string(bytes) + " bytes need a buffer class of " +
                                std::to_string(class_bytes) + " bytes, over the whole budget of " +
                                std::to_string(budget_) + " bytes");
  }
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<waiter> me;
  for (;;) {
    bool granted = false;
    std::unique_ptr<staging_pair> reused;
    std::vector<std::unique_ptr<staging_pair>> evicted;
    {
      std::lock_guard lock(mutex_);
      // In arrival order within a turn: a newcomer does not pass requests already waiting, so a large
      // request is not starved by a stream of small ones.
      if (my_turn(me, turn) && leased_ + class_bytes <= budget_) {
        granted = true;
        if (auto same = idle_.find(class_bytes); same != idle_.end() && !same->second.empty()) {
          reused = std::move(same->second.back());
          same->second.pop_back();
          idle_bytes_ -= class_bytes;
        } else {
          // Room for a new pair: idle pairs of other classes are freed until it fits, largest first.
          for (auto it = idle_.rbegin(); it != idle_.rend() && leased_ + idle_bytes_ + class_bytes > budget_; ++it) {
            while (!it->second.empty() && leased_ + idle_bytes_ + class_bytes > budget_) {
              idle_bytes_ -= it->first;
              evicted.push_back(std::move(it->second.back()));
              it->second.pop_back();
            }
          }
        }
        leased_ += class_bytes;
        if (me) waiters_.pop_front();
        wake_head();  // the next one may fit too
      } else if (!me) {
        me = std::make_shared<waiter>(executor);
        me->turn = turn;
        me->timer.expires_at(asio::steady_timer::time_point::max());
        enqueue(me);
      } else {
        me->woken = false;
        me->timer.expires_at(asio::steady_timer::time_point::max());
      }
    }
    if (granted) {
      release(std::move(evicted));
      if (reused) co_return buffer_lease(this, std::move(reused));
      try {
        co_return buffer_lease(this, allocate(class_bytes));
      } catch (...) {
        std::lock_guard lock(mutex_);
        leased_ -= class_bytes;
        wake_head();
        throw;
      }
    }
    co_await me->timer.async_wait(asio::bind_cancellation_slot(cancel, asio::as_tuple(asio::use_awaitable)));
    // The wait's handler stays in the slot after it completes, referring to this timer: the caller's next
    // cancellation must not reach it once the timer is gone.
    if (cancel.is_connected()) cancel.clear();
    std::lock_guard lock(mutex_);
    // A wake-up and a cancellation can cross: the caller's flag says whether it still wants the buffer.
    if (!me->woken || (given_up && given_up())) {  // leave the queue, and let the next one try in our place
      const bool was_head = !waiters_.empty() && waiters_.front() == me;
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), me));
      if (was_head) wake_head();
      co_return buffer_lease{};
    }
  }
}

}  // namespace ferry::pipeline
