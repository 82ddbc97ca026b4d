#include "examples/pipeline_server/server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/context.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace ferry::pipeline {
namespace {

constexpr auto awaitable_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_payload_prefix_bytes = std::size_t{16} << 20;

tcp::endpoint endpoint_of(const std::string& address, unsigned short port) {
  boost::system::error_code error;
  const asio::ip::address ip = asio::ip::make_address(address, error);
  if (error) throw std::invalid_argument("pipeline server: address \"" + address + "\" is not an IP address");
  return {ip, port};
}

void check_options(const server_options& o) {
  if (o.max_payload_bytes == 0) throw std::invalid_argument("pipeline server: max_payload_bytes is 0");
  if (buffer_pool::class_of(o.max_payload_bytes) > o.memory_budget_bytes) {
    throw std::invalid_argument("pipeline server: memory_budget_bytes " + std::to_string(o.memory_budget_bytes) +
                                " is below the buffer class of max_payload_bytes " +
                                std::to_string(o.max_payload_bytes) + " (" +
                                std::to_string(buffer_pool::class_of(o.max_payload_bytes)) + " bytes)");
  }
  if (o.io_threads == 0) throw std::invalid_argument("pipeline server: io_threads is 0");
  if (o.request_deadline.count() <= 0 || o.write_deadline.count() <= 0) {
    throw std::invalid_argument("pipeline server: request_deadline " + std::to_string(o.request_deadline.count()) +
                                " ms and write_deadline " + std::to_string(o.write_deadline.count()) +
                                " ms must both be positive");
  }
  if (o.header_deadline.count() <= 0) {
    throw std::invalid_argument("pipeline server: header_deadline " + std::to_string(o.header_deadline.count()) +
                                " ms must be positive");
  }
  if (o.max_connections == 0) throw std::invalid_argument("pipeline server: max_connections is 0");
  if (o.gpu_lanes == 0) throw std::invalid_argument("pipeline server: gpu_lanes is 0");
  // 0 would lease on the header alone; more than a few MiB per connection is memory outside the budget.
  if (o.payload_prefix_bytes == 0 || o.payload_prefix_bytes > max_payload_prefix_bytes) {
    throw std::invalid_argument("pipeline server: payload_prefix_bytes " + std::to_string(o.payload_prefix_bytes) +
                                " is not between 1 and " + std::to_string(max_payload_prefix_bytes));
  }
}

// What a status means for the connection: bad input and failures of the connection itself end it.
bool closes_connection(status s) {
  return s != status::ok && s != status::deadline_exceeded && s != status::gpu_error;
}

error_kind kind_of(status s) {
  switch (s) {
    case status::unknown_operation: return error_kind::unknown_operation;
    case status::too_large: return error_kind::too_large;
    case status::bad_magic: return error_kind::bad_magic;
    case status::truncated: return error_kind::truncated;
    case status::deadline_exceeded: return error_kind::deadline_exceeded;
    case status::shutting_down: return error_kind::shutting_down;
    default: return error_kind::gpu_error;
  }
}

}  // namespace

struct server::connection {
  explicit connection(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;  // its executor is the connection's strand, which runs everything below
  bool idle = false;   // waiting for the next request's header (shutdown closes such connections at once)
  std::atomic<bool> finished{false};  // its coroutine is ending: a shutdown need not wait for it
};

server::server(server_options options, const stage_factory& make_stage)
    : options_((check_options(options), std::move(options))),
      control_(asio::make_strand(io_)),
      acceptor_(control_),
      metrics_acceptor_(control_) {
  stage_ = make_stage(io_.get_executor());
  lanes_ = std::make_unique<lane_pool>(*stage_, options_.gpu_lanes);
  gpu_stage* const stage = stage_.get();
  pool_ = std::make_unique<buffer_pool>(
      options_.memory_budget_bytes, stage_->context(),
      buffer_pool::host_buffer_hooks{[stage](std::span<std::uint8_t> m) { return stage->adopt_host_buffer(m); },
                                     [stage](std::span<std::uint8_t> m) { stage->forget_host_memory(m); }});
  for (auto [acceptor, port, bound] : {std::tuple{&acceptor_, options_.port, &endpoint_},
                                       std::tuple{&metrics_acceptor_, options_.metrics_port, &metrics_endpoint_}}) {
    const tcp::endpoint wanted = endpoint_of(options_.address, port);
    acceptor->open(wanted.protocol());
    acceptor->set_option(tcp::acceptor::reuse_address(true));
    acceptor->bind(wanted);
    acceptor->listen();
    *bound = acceptor->local_endpoint();
  }
  asio::co_spawn(control_, accept_loop(), asio::detached);
  asio::co_spawn(control_, metrics_loop(), asio::detached);
  for (std::size_t i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] {
      // Kernel launches and stream creation happen on these threads, in the stage's context.
      context_guard in_stage(stage_->context());
      io_.run();
    });
  }
}

server::~server() {
  shutdown();
  wait();
}

void server::wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void server::shutdown() {
  if (stopping_.exchange(true)) return;
  asio::post(control_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    metrics_acceptor_.close(ignored);
    grace_timer_ = std::make_unique<asio::steady_timer>(control_, options_.shutdown_grace);
    grace_timer_->async_wait([this](boost::system::error_code error) {
      if (!error) close_connections(false);
    });
    close_connections(true);  // cancels the grace timer at once when no connection is left
  });
}

void server::close_connections(bool idle_only) {
  bool any = false;
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (auto c = it->lock(); c && !c->finished) {
      any = true;
      asio::post(c->socket.get_executor(), [c, idle_only] {
        if (idle_only && !c->idle) return;
        boost::system::error_code ignored;
        c->socket.close(ignored);
      });
      ++it;
    } else {
      it = connections_.erase(it);
    }
  }
  // Nothing left to wait for: the grace timer need not keep the threads up.
  if (!any && grace_timer_) grace_timer_->cancel();
}

std::string server::metrics_text() const {
  return metrics_.render(stage_->name(), pool_->current(), lanes_->current(), stage_->plan_counts());
}

asio::awaitable<void> server::accept_loop() {
  for (;;) {
    auto [error, socket] = co_await acceptor_.async_accept(asio::make_strand(io_), awaitable_tuple);
    if (error) {
      if (stopping_ || error == asio::error::operation_aborted) co_return;
      continue;  // a connection that failed before it was accepted (ECONNABORTED, EMFILE): try the next
    }
    socket.set_option(tcp::no_delay(true));
    if (static_cast<std::size_t>(metrics_.connections_open()) >= options_.max_connections) {
      metrics_.connection_refused();
      const asio::any_io_executor strand = socket.get_executor();
      asio::co_spawn(strand, refuse(std::move(socket)), asio::detached);
      continue;
    }
    // Counted here, not when its coroutine starts, so that a burst of connections sees the limit.
    metrics_.connection_opened();
    auto c = std::make_shared<connection>(std::move(socket));
    connections_.push_back(c);
    const asio::any_io_executor strand = c->socket.get_executor();  // before c is moved into serve
    asio::co_spawn(strand, serve(std::move(c)), asio::detached);
  }
}

// A connection over max_connections: told why, under the write deadline, then closed.
asio::awaitable<void> server::refuse(tcp::socket socket) {
  const std::string message = "the server is serving its maximum of " + std::to_string(options_.max_connections) +
                              " connections: try again later";
  const auto head = encode(reply_header{reply_magic, status::busy, message.size(), 0});
  deadline limit(co_await asio::this_coro::executor, options_.write_deadline);
  auto [error, written] = co_await asio::async_write(
      socket, std::array<asio::const_buffer, 2>{asio::buffer(head), asio::buffer(message)},
      asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  metrics_.add_bytes_out(written);
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

// Asio allocates and frees a coroutine's frame with the matching pair of awaitable_frame_base (its
// frame recycling: aligned_alloc and free underneath). On aarch64, GCC 12 at -O2 inlines this
// coroutine's operator new but not its operator delete, and -Wmismatched-new-delete takes the class's
// own operator delete for a mismatch with aligned_alloc: a false positive that -Werror makes fatal.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
asio::awaitable<void> server::serve(std::shared_ptr<connection> c) {
  struct on_exit {
    server& s;
    connection& c;
    ~on_exit() {
      c.finished = true;
      s.metrics_.connection_closed();
      // The last connection of a shutdown: the grace period need not run out.
      if (s.stopping_) asio::post(s.control_, [&s = s] { s.close_connections(true); });
    }
  } closed{*this, *c};
  tcp::socket& socket = c->socket;
  const asio::any_io_executor strand = socket.get_executor();

  // Writes a reply; false when the connection is gone (counted as why).
  auto write_reply = [&](const reply_header& header, asio::const_buffer body) -> asio::awaitable<bool> {
    const auto head = encode(header);
    deadline limit(strand, options_.write_deadline);
    auto [error, written] = co_await asio::async_write(
        socket, std::array<asio::const_buffer, 2>{asio::buffer(head), body},
        asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
    metrics_.add_bytes_out(written);
    if (error) metrics_.record_error(limit.expired() ? error_kind::write_timeout : error_kind::disconnected);
    co_return !error;
  };
  auto error_reply = [&](status s, const std::string& message) -> asio::awaitable<bool> {
    metrics_.record_error(kind_of(s));
    co_return co_await write_reply(reply_header{reply_magic, s, message.size(), 0}, asio::buffer(message));
  };

  // The first payload bytes of a request arrive here before it leases its buffers (kept for the next).
  std::vector<std::uint8_t> prefix;

  while (!stopping_) {
    std::array<std::byte, request_header_bytes> head_bytes;
    c->idle = true;
    deadline header_limit(strand, options_.header_deadline);
    auto [read_error, head_read] = co_await asio::async_read(
        socket, asio::buffer(head_bytes), asio::bind_cancellation_slot(header_limit.slot(), awaitable_tuple));
    header_limit.disarm();
    c->idle = false;
    if (read_error) {
      if (header_limit.expired()) {
        metrics_.record_error(error_kind::header_timeout);  // closed without a reply: the client is not talking
      } else if (read_error == asio::error::eof && head_read > 0) {
        co_await error_reply(status::truncated, "request header truncated: the connection ended after " +
                                                    std::to_string(head_read) + " of " +
                                                    std::to_string(request_header_bytes) + " bytes");
      } else if (read_error != asio::error::eof && !stopping_) {
        metrics_.record_error(error_kind::disconnected);
      }
      break;
    }
    const auto started = clock_type::now();
    metrics_.add_bytes_in(head_read);
    if (stopping_) {
      co_await error_reply(status::shutting_down, "the server is shutting down: the request was not run");
      break;
    }
    const request_header request = decode_request(head_bytes);
    if (request.magic != request_magic) {
      co_await error_reply(status::bad_magic, "not a request frame: magic 0x" + [&] {
        char hex[16];
        std::snprintf(hex, sizeof hex, "%08x", request.magic);
        return std::string(hex);
      }() + ", expected 0x31515246 (\"FRQ1\")");
      break;
    }
    const std::optional<operation> op = known_operation(request.operation);
    if (!op) {
      co_await error_reply(status::unknown_operation, "unknown operation " + std::to_string(request.operation) +
                                                          " (known: 1 transform, 2 checksum)");
      break;
    }
    auto finish = [&](status s) { metrics_.record_request(*op, s, clock_type::now() - started); };
    if (request.length > options_.max_payload_bytes) {
      co_await error_reply(status::too_large, "payload length " + std::to_string(request.length) +
                                                  " bytes is over the server's maximum of " +
                                                  std::to_string(options_.max_payload_bytes) + " bytes");
      finish(status::too_large);
      break;
    }
    const std::size_t bytes = request.length;

    deadline limit(strand, options_.request_deadline);
    // Why the payload's reading stopped after `read` of its bytes, answered when the client can hear it.
    auto payload_failed = [&](boost::system::error_code error, std::size_t read) -> asio::awaitable<void> {
      if (error == asio::error::eof) {
        co_await error_reply(status::truncated, "payload truncated: the connection ended after " +
                                                    std::to_string(read) + " of " + std::to_string(bytes) + " bytes");
        finish(status::truncated);
      } else if (limit.expired()) {
        co_await error_reply(status::deadline_exceeded, "the request's deadline passed while its payload was read");
        finish(status::deadline_exceeded);
      } else {
        metrics_.record_error(error_kind::disconnected);
      }
    };

    // The prefix first: until it is here the request holds no budget, however long it announced.
    const std::size_t prefix_bytes = std::min(bytes, options_.payload_prefix_bytes);
    if (prefix.size() < prefix_bytes) prefix.resize(prefix_bytes);
    auto [prefix_error, prefix_read] = co_await asio::async_read(
        socket, asio::buffer(prefix.data(), prefix_bytes), asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
    metrics_.add_bytes_in(prefix_read);
    if (prefix_error) {
      co_await payload_failed(prefix_error, prefix_read);
      break;
    }

    buffer_lease lease;
    std::string allocation_failure;
    try {
      lease = co_await pool_->acquire(bytes, limit.slot(), [&] { return limit.expired(); });
    } catch (const std::exception& error) {  // out of host or device memory: nothing is held
      allocation_failure = error.what();
    }
    if (!allocation_failure.empty()) {
      co_await error_reply(status::gpu_error, "no memory for the request (payload unread): " + allocation_failure);
      finish(status::gpu_error);
      break;
    }
    if (!lease) {
      co_await error_reply(status::deadline_exceeded,
                           "the request's deadline passed while it waited for staging memory (payload unread)");
      finish(status::deadline_exceeded);
      break;
    }
    staging_pair& pair = lease.pair();
    std::copy_n(prefix.data(), prefix_bytes, pair.host.get());
    auto [payload_error, payload_read] = co_await asio::async_read(
        socket, asio::buffer(pair.host.get() + prefix_bytes, bytes - prefix_bytes),
        asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
    metrics_.add_bytes_in(payload_read);
    if (payload_error) {
      co_await payload_failed(payload_error, prefix_bytes + payload_read);
      break;
    }

    stage_outcome outcome;
    {
      // Borrowed for the GPU step only: the reply's write, however slow, holds no lane.
      lane_loan lane;
      std::string lane_failure;
      try {
        lane = co_await lanes_->borrow(limit.slot(), [&] { return limit.expired(); });
      } catch (const std::exception& error) {  // no stream could be made: nothing is held
        lane_failure = error.what();
      }
      if (!lane_failure.empty()) {
        outcome = {status::gpu_error, "no GPU lane for the request: " + lane_failure, 0};
      } else if (!lane) {
        outcome = {status::deadline_exceeded, "the request's deadline passed while it waited for a GPU lane", 0};
      } else {
        try {
          outcome = co_await lane->run(*op, pair, bytes, limit);
        } catch (const std::exception& error) {  // thrown before anything reached the GPU
          outcome = {status::gpu_error, std::string("the GPU step could not start: ") + error.what(), 0};
        }
      }
    }
    limit.disarm();
    bool written;
    if (outcome.status == status::ok) {
      const std::size_t body = reply_body_length(*op, bytes);
      written = co_await write_reply(reply_header{reply_magic, status::ok, body, outcome.checksum},
                                     asio::buffer(pair.host.get(), body));
    } else {
      written = co_await error_reply(outcome.status, outcome.message);
    }
    finish(outcome.status);
    if (!written || closes_connection(outcome.status)) break;
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

asio::awaitable<void> server::metrics_loop() {
  for (;;) {
    auto [error, socket] = co_await metrics_acceptor_.async_accept(asio::make_strand(io_), awaitable_tuple);
    if (error) {
      if (stopping_ || error == asio::error::operation_aborted) co_return;
      continue;
    }
    // On the socket's strand: the scrape's deadline and its socket operations never run at once.
    const asio::any_io_executor strand = socket.get_executor();
    asio::co_spawn(strand, answer_scrape(tcp::socket(std::move(socket))), asio::detached);
  }
}

// A minimal HTTP/1.0 answer: GET /metrics gets the exposition, anything else 404; then the connection
// is closed. A scrape that does not finish its request within the write deadline is dropped.
asio::awaitable<void> server::answer_scrape(tcp::socket socket) {
  asio::streambuf request(8192);
  deadline limit(co_await asio::this_coro::executor, options_.write_deadline);
  auto [error, length] =
      co_await asio::async_read_until(socket, request, "\r\n\r\n", asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  if (error) co_return;
  const std::string head(asio::buffers_begin(request.data()), asio::buffers_begin(request.data()) + length);
  const bool wanted = head.rfind("GET /metrics ", 0) == 0 || head.rfind("GET /metrics?", 0) == 0;
  const std::string body = wanted ? metrics_text() : "not found: the metrics are at /metrics\n";
  const std::string reply = std::string(wanted ? "HTTP/1.0 200 OK\r\n" : "HTTP/1.0 404 Not Found\r\n") +
                            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  co_await asio::async_write(socket, asio::buffer(reply), asio::bind_cancellation_slot(limit.slot(), awaitable_tuple));
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace ferry::pipeline
