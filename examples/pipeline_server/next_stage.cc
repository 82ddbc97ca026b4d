#include "examples/pipeline_server/next_stage.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <stdexcept>

#include "examples/pipeline_server/awaitable_tuple.hpp"
#include "examples/pipeline_server/server.hpp"

namespace asio = boost::asio;
using boost::system::error_code;

namespace ferry::pipeline {
namespace {

// The largest window message: its header and a descriptor, whose packed key is well below this.
constexpr std::size_t window_message_limit = std::size_t{64} << 10;

// Runs `io` on this thread until `done`; once `until` has passed, `give_up` cancels what is waited for
// (which then completes). True when it had to give up.
bool run_until(asio::io_context& io, const bool& done, std::chrono::steady_clock::time_point until,
               asio::cancellation_signal& give_up) {
  bool cancelled = false;
  while (!done) {
    if (!cancelled && std::chrono::steady_clock::now() >= until) {
      give_up.emit(asio::cancellation_type::terminal);
      cancelled = true;
    }
    io.run_one_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
  return cancelled;
}

}  // namespace

std::shared_ptr<next_stage> next_stage::connect(remote::worker& worker, asio::io_context& io, settings s) {
  const auto [host, port] = split_host_port(s.host_port, "--next-stage");
  const std::string who = "--next-stage " + s.host_port;
  const auto until = std::chrono::steady_clock::now() + s.connect_limit;
  asio::cancellation_signal give_up;
  const std::string within = " within " + std::to_string(s.connect_limit.count()) + " ms";

  bool connected = false;
  error_code connect_error;
  remote::endpoint e;
  worker.async_connect(host, port, asio::bind_cancellation_slot(give_up.slot(), [&](error_code error, remote::endpoint made) {
                         connect_error = error;
                         e = std::move(made);
                         connected = true;
                       }));
  if (run_until(io, connected, until, give_up) || connect_error) {
    throw std::runtime_error(who + ": the next stage cannot be reached" + (connect_error ? ": " : within) +
                             (connect_error ? connect_error.message() : std::string()));
  }

  bool received = false;
  error_code receive_error;
  std::size_t length = 0;
  std::vector<std::byte> message(window_message_limit);
  e.async_receive(message, asio::bind_cancellation_slot(give_up.slot(), [&](error_code error, std::size_t bytes) {
                    receive_error = error;
                    length = bytes;
                    received = true;
                  }));
  if (run_until(io, received, until, give_up) || receive_error) {
    throw std::runtime_error(who + ": no window from the next stage" +
                             (receive_error ? ": " + receive_error.message() : within));
  }
  try {
    const auto [header, about] = decode_window(std::span(message).first(length));
    remote::descriptor window = remote::descriptor::deserialize(about);
    if (window.size() < header.slots * header.slot_bytes) {
      throw std::invalid_argument("its window of " + std::to_string(window.size()) + " bytes is smaller than " +
                                  std::to_string(header.slots) + " slots of " + std::to_string(header.slot_bytes));
    }
    const std::uint64_t capacity = header.slot_bytes - checksum_slot_bytes;
    if (capacity < s.max_payload_bytes) {
      throw std::invalid_argument("its slots hold payloads of up to " + std::to_string(capacity) +
                                  " bytes, fewer than this server's max_payload_bytes " +
                                  std::to_string(s.max_payload_bytes) + " (start it with --max-payload " +
                                  std::to_string(s.max_payload_bytes) + " or more)");
    }
    return std::make_shared<next_stage>(std::move(s), std::move(e), std::move(window), header);
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error(who + ": the next stage's window cannot be used: " + error.what());
  }
}

next_stage::next_stage(settings s, remote::endpoint e, remote::descriptor window, window_header header)
    : settings_(std::move(s)),
      endpoint_(std::move(e)),
      window_(std::move(window)),
      header_(header),
      slots_(std::min<std::size_t>(settings_.slots, header.slots)) {
  for (std::size_t i = slots_; i-- > 0;) free_slots_.push_back(static_cast<std::uint32_t>(i));
}

void next_stage::start(asio::io_context& io) {
  // A strand of the io_context's own executor, not of an any_io_executor: that one would be kept in a
  // shared wrapper whose reference count ThreadSanitizer cannot follow (it releases through a fence).
  asio::co_spawn(asio::make_strand(io), [self = shared_from_this()] { return self->read_answers(); },
                 asio::detached);
}

std::optional<std::string> next_stage::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

next_stage::occupancy next_stage::current() const {
  std::lock_guard lock(mutex_);
  return occupancy{slots_, slots_ - free_slots_.size(), slot_waiters_.size()};
}

stage_outcome next_stage::failed_outcome() const {
  return stage_outcome{status::next_stage_failed, *failure_, 0};
}

void next_stage::wake(const std::shared_ptr<waiter>& w) {
  w->woken = true;
  // The timer belongs to the waiting coroutine's executor (its strand): touched only there. Moving its
  // expiry to the past wakes a wait already started and makes one not yet started return at once.
  asio::post(w->timer.get_executor(), [w] { w->timer.expires_at(asio::steady_timer::time_point::min()); });
}

void next_stage::free_slot(std::uint32_t slot) {
  if (!slot_waiters_.empty()) {
    std::shared_ptr<waiter> head = slot_waiters_.front();
    slot_waiters_.pop_front();
    head->slot = slot;
    wake(head);
    return;
  }
  free_slots_.push_back(slot);
}

void next_stage::fail_all(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!failure_) failure_ = why;
  for (auto& [id, entry] : in_flight_) {
    if (entry.waiting && !entry.waiting->abandoned) {
      entry.waiting->answer = failed_outcome();
      wake(entry.waiting);
    }
  }
  in_flight_.clear();
  for (auto& w : slot_waiters_) wake(w);  // no slot: they find the failure
  slot_waiters_.clear();
}

asio::awaitable<void> next_stage::read_answers() {
  std::vector<std::byte> buffer(answer_header_bytes + answer_message_limit);
  for (;;) {
    auto [error, bytes] = co_await endpoint_.async_receive(buffer, awaitable_tuple);
    if (error) {
      fail_all(error == asio::error::operation_aborted
                   ? "the link to the next stage " + settings_.host_port + " was closed (this server is stopping)"
                   : "the next stage " + settings_.host_port + " is gone: " + error.message());
      co_return;
    }
    const std::optional<forward_answer> answer = decode_answer(std::span(buffer).first(bytes));
    if (!answer) {
      fail_all("the next stage " + settings_.host_port + " sent a message of " + std::to_string(bytes) +
               " bytes, not an answer (at least " + std::to_string(answer_header_bytes) + ")");
      co_return;
    }
    std::lock_guard lock(mutex_);
    const auto found = in_flight_.find(answer->request_id);
    if (found == in_flight_.end()) continue;  // failed already, or not a request of this server's
    const in_flight entry = found->second;
    in_flight_.erase(found);
    free_slot(entry.slot);  // answered: the next stage is done with the slot
    if (entry.waiting->abandoned) continue;
    entry.waiting->answer =
        answer->status == status::ok
            ? stage_outcome{status::ok, {}, answer->checksum}
            : stage_outcome{status::next_stage_failed,
                            "the next stage answered " + std::string(to_string(answer->status)) + ": " + answer->message, 0};
    wake(entry.waiting);
  }
}

asio::awaitable<std::optional<std::uint32_t>> next_stage::take_slot(deadline& limit) {
  std::shared_ptr<waiter> me;
  {
    std::lock_guard lock(mutex_);
    if (failure_) co_return std::nullopt;
    // Strictly in arrival order: a newcomer does not pass forwards already waiting.
    if (slot_waiters_.empty() && !free_slots_.empty()) {
      const std::uint32_t slot = free_slots_.back();
      free_slots_.pop_back();
      co_return slot;
    }
    me = std::make_shared<waiter>(co_await asio::this_coro::executor);
    me->timer.expires_at(asio::steady_timer::time_point::max());
    slot_waiters_.push_back(me);
  }
  co_await me->timer.async_wait(asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  std::lock_guard lock(mutex_);
  if (me->slot) {
    // A wake-up and the deadline can cross: a slot given to a forward that gave up goes on.
    if (!limit.expired()) co_return me->slot;
    free_slot(*me->slot);
    co_return std::nullopt;
  }
  if (auto queued = std::find(slot_waiters_.begin(), slot_waiters_.end(), me); queued != slot_waiters_.end()) {
    slot_waiters_.erase(queued);
  }
  co_return std::nullopt;
}

asio::awaitable<stage_outcome> next_stage::await_answer(const std::shared_ptr<waiter>& me, deadline& limit) {
  co_await me->timer.async_wait(asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  std::lock_guard lock(mutex_);
  if (me->answer) co_return *me->answer;
  me->abandoned = true;  // its entry stays: the answer, when it comes, frees the slot
  co_return stage_outcome{status::deadline_exceeded,
                          "the request's deadline passed while it waited for the next stage's answer", 0};
}

asio::awaitable<stage_outcome> next_stage::forward(remote::local_bytes data, deadline& limit) {
  const std::optional<std::uint32_t> slot = co_await take_slot(limit);
  if (!slot) {
    std::lock_guard lock(mutex_);
    if (failure_) co_return failed_outcome();
    co_return stage_outcome{status::deadline_exceeded,
                            "the request's deadline passed while it waited for a slot of the next stage's window", 0};
  }
  if (data.size > 0) {
    auto [error, moved] = co_await endpoint_.async_put(data, window_.window(*slot * header_.slot_bytes, data.size),
                                                      asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
    if (error || limit.expired()) {
      std::lock_guard lock(mutex_);
      free_slot(*slot);  // the next stage was not told of it: free again
      if (limit.expired()) {
        co_return stage_outcome{status::deadline_exceeded,
                                "the request's deadline passed during the put to the next stage", 0};
      }
      co_return stage_outcome{status::next_stage_failed,
                              "the put to the next stage " + settings_.host_port + " failed: " + error.message(), 0};
    }
  }
  const std::uint64_t id = next_id_.fetch_add(1);
  auto me = std::make_shared<waiter>(co_await asio::this_coro::executor);
  me->timer.expires_at(asio::steady_timer::time_point::max());
  {
    std::lock_guard lock(mutex_);
    if (failure_) co_return failed_outcome();
    // Before the message goes: its answer may come before the send completes.
    in_flight_.emplace(id, in_flight{*slot, me});
  }
  const auto message = encode(forward_message{id, *slot, data.size});
  if (auto [error] = co_await endpoint_.async_send(message, awaitable_tuple); error) {
    std::lock_guard lock(mutex_);
    if (in_flight_.erase(id) > 0) free_slot(*slot);
    co_return stage_outcome{status::next_stage_failed,
                            "the forward message to the next stage " + settings_.host_port + " failed: " + error.message(),
                            0};
  }
  co_return co_await await_answer(me, limit);
}

}  // namespace ferry::pipeline
