#include "examples/pipeline_server/stage_listener.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "examples/pipeline_server/awaitable_tuple.hpp"
#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/marshal.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {

struct stage_listener::window {
  explicit window(context_ref c) : context(c) {}
  window(const window&) = delete;
  window& operator=(const window&) = delete;
  const context_ref context;
  std::unique_ptr<std::uint8_t[], free_host_memory> host;  // a host window
  device_buffer<std::uint8_t> device;                      // a device window
  remote::registration registration;
  remote::endpoint endpoint;
  std::vector<std::byte> announcement;  // the first message

  window_slot slot(std::uint32_t index, std::size_t slot_bytes) const {
    const std::size_t at = index * slot_bytes;
    return host ? window_slot{host.get() + at, {}} : window_slot{nullptr, device.get() + static_cast<std::ptrdiff_t>(at)};
  }
  // The registration goes before the memory, and device memory is freed in its context.
  ~window() {
    registration = remote::registration();
    context_guard in_context(context);
    device = device_buffer<std::uint8_t>();
  }
};

stage_listener::stage_listener(remote::worker& worker, gpu_stage& stage, lane_pool& lanes, buffer_pool& pool,
                               settings s)
    : worker_(worker),
      stage_(stage),
      lanes_(lanes),
      pool_(pool),
      settings_(s),
      slot_bytes_(checksum_offset(s.max_payload_bytes) + checksum_slot_bytes) {}

void stage_listener::start(asio::any_io_executor control, asio::io_context& io) {
  io_ = &io;
  asio::co_spawn(control, accept_loop(), asio::detached);
}

asio::awaitable<void> stage_listener::accept_loop() {
  for (;;) {
    auto [error, accepted] = co_await worker_.async_accept(awaitable_tuple);
    // stop() runs on this strand before the worker goes: past it, the worker is not to be touched.
    if (stopped_) co_return;
    if (error) continue;  // a peer that failed its wire-up
    std::shared_ptr<window> w;
    try {
      w = make_window(std::move(accepted));
    } catch (const std::exception&) {
      continue;  // no memory for its window: its endpoint closes, and the previous stage sees it
    }
    asio::co_spawn(asio::make_strand(*io_), serve(std::move(w)), asio::detached);
  }
}

std::shared_ptr<stage_listener::window> stage_listener::make_window(remote::endpoint e) {
  auto w = std::make_shared<window>(stage_.context());
  const std::size_t bytes = settings_.slots * slot_bytes_;
  if (settings_.memory == remote::memory_kind::device) {
    context_guard in_context(w->context);
    w->device = device_buffer<std::uint8_t>::allocate(bytes);
    // Zeroed: the kernel loads whole 16-byte units, padding included, which nothing else writes.
    memset_async(device_ptr<std::uint32_t>(w->device.get().get()), bytes / 4, std::uint32_t{0}, stream_ref::legacy_default());
    stream_ref::legacy_default().synchronize();
    w->registration = worker_.register_memory(w->device.get(), bytes);
  } else {
    static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t rounded = (bytes + page - 1) / page * page;
    w->host.reset(static_cast<std::uint8_t*>(std::aligned_alloc(page, rounded)));
    if (!w->host) throw std::bad_alloc();
    std::memset(w->host.get(), 0, rounded);  // the padding poked with a slot is defined
    w->registration = worker_.register_memory(std::span(reinterpret_cast<std::byte*>(w->host.get()), bytes));
  }
  w->announcement = encode_window(window_header{static_cast<std::uint32_t>(settings_.slots), slot_bytes_},
                                  w->registration.export_descriptor().serialize());
  w->endpoint = std::move(e);
  return w;
}

asio::awaitable<void> stage_listener::serve(std::shared_ptr<window> w) {
  if (auto [error] = co_await w->endpoint.async_send(w->announcement, awaitable_tuple); error) co_return;
  // Longer than a forward message, so that one of another length is seen as such.
  std::vector<std::byte> buffer(forward_message_bytes * 4);
  for (;;) {
    auto [error, bytes] = co_await w->endpoint.async_receive(buffer, awaitable_tuple);
    if (error) co_return;  // the previous stage went, or this server is stopping
    const std::optional<forward_message> message = decode_forward(std::span(buffer).first(bytes));
    if (!message) {
      const auto refusal = encode(forward_answer{0, status::bad_magic, 0,
                                                 "a stage message of " + std::to_string(bytes) + " bytes, not a " +
                                                     std::to_string(forward_message_bytes) + "-byte forward message"});
      co_await w->endpoint.async_send(refusal, awaitable_tuple);
      continue;
    }
    asio::co_spawn(asio::make_strand(*io_), answer(w, *message), asio::detached);
  }
}

asio::awaitable<void> stage_listener::answer(std::shared_ptr<window> w, forward_message message) {
  deadline limit(co_await asio::this_coro::executor, settings_.deadline);
  stage_outcome outcome;
  try {
    outcome = co_await checksum(*w, message, limit);
  } catch (const std::exception& error) {  // thrown before anything reached the GPU
    outcome = {status::gpu_error, std::string("the GPU step could not start: ") + error.what(), 0};
  }
  limit.disarm();
  const auto bytes = encode(forward_answer{message.request_id, outcome.status, outcome.checksum, outcome.message});
  // A failed send: the previous stage is gone, and its own endpoint says so there.
  co_await w->endpoint.async_send(bytes, awaitable_tuple);
}

asio::awaitable<stage_outcome> stage_listener::checksum(window& w, const forward_message& message, deadline& limit) {
  if (message.slot >= settings_.slots || message.bytes > settings_.max_payload_bytes) {
    co_return stage_outcome{status::too_large,
                            "forward of " + std::to_string(message.bytes) + " bytes in slot " +
                                std::to_string(message.slot) + ": the window has " + std::to_string(settings_.slots) +
                                " slots of up to " + std::to_string(settings_.max_payload_bytes) + " bytes",
                            0};
  }
  buffer_lease scratch;
  if (w.host) {
    try {
      scratch = co_await pool_.acquire(message.bytes, limit.slot(), [&limit] { return limit.expired(); });
    } catch (const std::exception& error) {  // out of host or device memory: nothing is held
      co_return stage_outcome{status::gpu_error, std::string("no device buffer for the slot: ") + error.what(), 0};
    }
    if (!scratch) {
      co_return stage_outcome{status::deadline_exceeded, "the deadline passed while the slot waited for staging memory",
                              0};
    }
  }
  std::pair<lane_loan, stage_outcome> borrowed = co_await borrow_within(lanes_, limit);
  if (!borrowed.first) co_return std::move(borrowed.second);
  co_return co_await borrowed.first->checksum_slot(w.slot(message.slot, slot_bytes_), message.bytes,
                                         scratch ? &scratch.pair() : nullptr, limit);
}

}  // namespace ferry::pipeline
