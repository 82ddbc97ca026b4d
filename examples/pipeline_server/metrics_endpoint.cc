// The metrics port: HTTP (Boost.Beast) that answers GET /metrics with the exposition
// (server_metrics::render), another method on /metrics with 405 and any other path with 404, one
// request per connection. A scraper that does not send its whole request within the header deadline, or
// does not take the answer within the write deadline, is dropped.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <string>
#include <string_view>

#include "examples/pipeline_server/awaitable_tuple.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {

namespace {

namespace http = boost::beast::http;

// What a scrape's request gets. `metrics` renders the exposition, only for a request that gets it.
template <class Render>
http::response<http::string_body> reply_to(const http::request<http::string_body>& request, const Render& metrics) {
  http::response<http::string_body> response;
  response.version(request.version());
  response.keep_alive(false);
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  const std::string_view target = request.target();
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    response.result(http::status::not_found);
    response.body() = "not found: the metrics are at /metrics\n";
  } else if (request.method() != http::verb::get) {
    response.result(http::status::method_not_allowed);
    response.set(http::field::allow, "GET");
    response.body() = "method not allowed: GET /metrics\n";
  } else {
    response.result(http::status::ok);
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.body() = metrics();
  }
  response.prepare_payload();
  return response;
}

}  // namespace

std::string server::metrics_text() const {
  return metrics_.render(stage_->name(), pool_->current(), lanes_->current(), large_payloads(), stage_->plan_counts());
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

asio::awaitable<void> server::answer_scrape(tcp::socket socket) {
  boost::beast::tcp_stream stream(std::move(socket));
  boost::beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(8192);  // a scrape sends none; a client that sends more is not a scraper
  stream.expires_after(options_.header_deadline);
  auto [read_error, read_bytes] = co_await http::async_read(stream, buffer, parser, awaitable_tuple);
  if (read_error) co_return;  // the header deadline passed, the client left, or it sent no HTTP
  const auto response = reply_to(parser.get(), [this] { return metrics_text(); });
  stream.expires_after(options_.write_deadline);
  co_await http::async_write(stream, response, awaitable_tuple);  // an error here leaves nothing to do
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

}  // namespace ferry::pipeline
