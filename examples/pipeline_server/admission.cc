// Admission: the acceptor's loop, which serves a connection under the limit (max_connections) on a
// strand of its own and answers one over it `busy` before closing it. Failed accepts go through
// accept_backoff: out of descriptors, a waiting client is answered `busy` too.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <string>

#include "examples/pipeline_server/accept_backoff.hpp"
#include "examples/pipeline_server/awaitable_tuple.hpp"
#include "examples/pipeline_server/connection.hpp"
#include "examples/pipeline_server/deadline.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {

namespace {

// A `busy` reply: its header and `message`, as one frame.
std::string busy_frame(const std::string& message) {
  const auto head = encode(reply_header{reply_magic, status::busy, message.size(), 0});
  std::string frame(reinterpret_cast<const char*>(head.data()), head.size());
  return frame + message;
}

}  // namespace

asio::awaitable<void> server::accept_loop() {
  const std::string out_of_descriptors =
      busy_frame("the server is out of file descriptors (its open-files limit): try again later");
  for (;;) {
    auto [error, socket] = co_await accepts_->accept(asio::make_strand(io_), out_of_descriptors);
    if (error) co_return;  // the acceptor was closed: shutting down
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // a client that already left: its first read says so
    if (static_cast<std::size_t>(metrics_.connections_open()) >= max_connections()) {
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
  const std::string message = "the server is serving its maximum of " + std::to_string(max_connections()) +
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

}  // namespace ferry::pipeline
