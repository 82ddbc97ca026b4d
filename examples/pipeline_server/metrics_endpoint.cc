// The metrics port: HTTP/1.1 (Boost.Beast) that answers GET and HEAD of /metrics with the exposition
// (server_metrics::render; HEAD with its header alone), another method on /metrics with 405 (Allow: GET,
// HEAD) and any other path with 404, one request per connection; a target in absolute form
// (http://host:port/metrics?x) is served like one in origin form (/metrics?x). A request is read whole,
// its body (up to body_limit bytes) dropped, before it is answered, and a connection ends gracefully:
// its sending side shut, what the client still sends read and dropped (bounded in bytes and time), then
// closed, so that no client is reset before it has read its answer. A request line or header over
// header_limit gets 431, a body over body_limit 413, any other malformed request 400. A scraper that does
// not send its whole request within the header deadline, or does not take the answer within the write
// deadline, is dropped. At most max_metrics_connections are answered at once; more get 503 and are closed.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "examples/pipeline_server/accept_backoff.hpp"
#include "examples/pipeline_server/awaitable_tuple.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {

namespace {

namespace http = boost::beast::http;
using boost::beast::tcp_stream;

// A request line and header of at most this many bytes: a scrape's are far smaller.
constexpr std::size_t header_limit = 8192;
// Request content read and dropped before the answer; a scrape sends none.
constexpr std::uint64_t body_limit = std::uint64_t{1} << 20;
// After the answer, what the client still sends is read and dropped up to this much, for this long.
constexpr std::size_t drain_limit_bytes = std::size_t{4} << 20;
constexpr std::chrono::seconds drain_limit_time{2};

using request_parser = http::request_parser<http::buffer_body>;
using response = http::response<http::string_body>;

response plain(http::status status, unsigned version, std::string body) {
  response r{status, version};
  r.keep_alive(false);
  r.set(http::field::content_type, "text/plain; charset=utf-8");
  r.body() = std::move(body);
  return r;
}

// An answer written before any request is read, to a connection that will not be served.
std::string unavailable(const std::string& why) {
  const std::string body = why + "\n";
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
}

// The path of a target in origin form (/metrics?x) or in absolute form (http://host:port/metrics?x,
// whose empty path is "/"), without its query; another form is left as it is (and found nowhere).
std::string_view path_of(std::string_view target) {
  const std::size_t scheme_end = target.find("://");
  if (scheme_end != std::string_view::npos) {
    const std::string_view scheme = target.substr(0, scheme_end);
    if (boost::beast::iequals(scheme, "http") || boost::beast::iequals(scheme, "https")) {
      const std::string_view rest = target.substr(scheme_end + 3);
      const std::size_t path = rest.find_first_of("/?#");
      target = path == std::string_view::npos || rest[path] != '/' ? std::string_view("/") : rest.substr(path);
    }
  }
  return target.substr(0, target.find_first_of("?#"));
}

// What a request read whole gets. `metrics` renders the exposition, only for a request that gets it.
template <class Render>
response reply_to(const http::request_header<>& request, const Render& metrics) {
  if (path_of(request.target()) != "/metrics") {
    return plain(http::status::not_found, request.version(), "not found: the metrics are at /metrics\n");
  }
  if (request.method() != http::verb::get && request.method() != http::verb::head) {
    response r = plain(http::status::method_not_allowed, request.version(), "method not allowed: GET or HEAD /metrics\n");
    r.set(http::field::allow, "GET, HEAD");
    return r;
  }
  response r = plain(http::status::ok, request.version(), metrics());
  r.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  return r;
}

// What a request that could not be read gets: nothing when the client left or the header deadline
// passed (no one to tell, or a client not worth waiting for).
std::optional<response> reply_to_failure(const boost::system::error_code& error) {
  if (error == http::error::header_limit) {
    return plain(http::status::request_header_fields_too_large, 11,
                 "request header fields too large: the request line and header must fit in " +
                     std::to_string(header_limit) + " bytes\n");
  }
  if (error == http::error::body_limit) {
    return plain(http::status::payload_too_large, 11,
                 "content too large: the metrics port reads at most " + std::to_string(body_limit) + " bytes of it\n");
  }
  const bool malformed = error.category() == http::make_error_code(http::error::bad_target).category() &&
                         error != http::error::end_of_stream && error != http::error::partial_message;
  if (!malformed) return std::nullopt;
  return plain(http::status::bad_request, 11, "bad request: " + error.message() + "\n");
}

// Reads the rest of a request whose header was read, dropping its body.
asio::awaitable<boost::system::error_code> drop_body(tcp_stream& stream, boost::beast::flat_buffer& buffer,
                                                     request_parser& parser) {
  const http::request_header<>& request = parser.get();
  if (!parser.is_done() && request.version() >= 11 && boost::beast::iequals(request[http::field::expect], "100-continue")) {
    static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
    auto [error, written] = co_await asio::async_write(stream, asio::buffer(go_on), awaitable_tuple);
    if (error) co_return error;
  }
  std::array<char, 16384> sink;
  while (!parser.is_done()) {
    parser.get().body().data = sink.data();
    parser.get().body().size = sink.size();
    auto [error, read] = co_await http::async_read(stream, buffer, parser, awaitable_tuple);
    if (error && error != http::error::need_buffer) co_return error;  // need_buffer: the sink is full
  }
  co_return boost::system::error_code{};
}

asio::awaitable<boost::system::error_code> write_answer(tcp_stream& stream, response& answer, bool header_only) {
  answer.prepare_payload();  // Content-Length of the body, for HEAD too
  http::response_serializer<http::string_body> serializer(answer);
  auto [error, written] = header_only ? co_await http::async_write_header(stream, serializer, awaitable_tuple)
                                      : co_await http::async_write(stream, serializer, awaitable_tuple);
  co_return error;
}

// A close with bytes unread resets the connection, and a client reset before it has read its answer
// loses it: the sending side is shut first, and what the client still sends read and dropped.
asio::awaitable<void> close_gracefully(tcp_stream& stream) {
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.expires_after(drain_limit_time);
  std::array<char, 16384> sink;
  for (std::size_t drained = 0; drained < drain_limit_bytes;) {
    auto [error, read] = co_await stream.async_read_some(asio::buffer(sink), awaitable_tuple);
    if (error) break;  // the client's end of stream, or the drain's time is up
    drained += read;
  }
  stream.socket().close(ignored);
}

}  // namespace

std::string server::metrics_text() const {
  return metrics_.render(stage_->name(), pool_->current(), lanes_->current(), large_payloads(), stage_->plan_counts());
}

asio::awaitable<void> server::metrics_loop() {
  const std::string out_of_descriptors =
      unavailable("the server is out of file descriptors (its open-files limit): try again later");
  const std::string over_the_cap = unavailable("the metrics port is answering its maximum of " +
                                               std::to_string(options_.max_metrics_connections) +
                                               " connections: try again later");
  for (;;) {
    auto [error, socket] = co_await metrics_accepts_->accept(asio::make_strand(io_), out_of_descriptors);
    if (error) co_return;  // the acceptor was closed: shutting down
    if (static_cast<std::size_t>(metrics_.scrapes_open()) >= options_.max_metrics_connections) {
      metrics_.connection_refused(accept_port::metrics);
      turn_away(socket, over_the_cap);
      continue;
    }
    // Counted here, not when its coroutine starts, so that a burst of connections sees the cap.
    metrics_.scrape_opened();
    // On the socket's strand: the scrape's deadline and its socket operations never run at once.
    const asio::any_io_executor strand = socket.get_executor();
    asio::co_spawn(strand, answer_scrape(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> server::answer_scrape(tcp::socket socket) {
  struct open_scrape {
    server_metrics& metrics;
    ~open_scrape() { metrics.scrape_closed(); }
  } counted{metrics_};
  tcp_stream stream(std::move(socket));
  boost::beast::flat_buffer buffer;
  request_parser parser;
  parser.header_limit(header_limit);
  parser.body_limit(body_limit);
  stream.expires_after(options_.header_deadline);  // for the whole request
  auto [error, read] = co_await http::async_read_header(stream, buffer, parser, awaitable_tuple);
  if (!error) error = co_await drop_body(stream, buffer, parser);
  std::optional<response> answer =
      error ? reply_to_failure(error) : reply_to(parser.get(), [this] { return metrics_text(); });
  if (!answer) co_return;
  stream.expires_after(options_.write_deadline);
  const bool header_only = !error && parser.get().method() == http::verb::head;
  if (!co_await write_answer(stream, *answer, header_only)) co_await close_gracefully(stream);
}

}  // namespace ferry::pipeline
