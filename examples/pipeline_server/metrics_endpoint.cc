// The metrics port: a minimal HTTP/1.0 server that answers GET /metrics with the exposition
// (server_metrics::render) and anything else with 404, one request per connection.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>

#include <string>

#include "examples/pipeline_server/awaitable_tuple.hpp"
#include "examples/pipeline_server/deadline.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {

std::string server::metrics_text() const {
  return metrics_.render(stage_->name(), pool_->current(), lanes_->current(), stage_->plan_counts());
}

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

// A scrape that does not finish its request within the write deadline is dropped; the connection is
// closed after the answer.
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
