// The pipeline server's metrics port as an HTTP/1.1 server (RFC 9110, 9112): HEAD answered like GET
// without a body, a target in absolute form served like one in origin form, 405 for another method only
// once the request's body has been read, 431 for a request line over the header limit, 400 for what is
// not HTTP; every answer read whole by the client and the connection ended without a reset.
#include "examples/pipeline_server/server.hpp"

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "tests/pipeline/client.hpp"
#include "tests/pipeline/server_fixture.hpp"

using namespace ferry;
using namespace ferry::testing;
using std::chrono::milliseconds;
using namespace std::string_literals;

namespace {

constexpr milliseconds patience = std::chrono::seconds(20);

struct http_answer {
  std::string head;  // the status line and the header fields, up to the empty line
  std::string body;  // what followed, until the server closed the connection
  bool ended = false;  // the server ended the stream (no reset, no timeout)
  bool reset = false;

  std::string field(const std::string& name) const {
    const std::size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return {};
    const std::size_t value = at + name.size() + 4;
    return head.substr(value, head.find("\r\n", value) - value);
  }
};

// Sends `request` from a thread of its own (a server that stops reading cannot block the test), then
// ends the sending side, and reads what comes back until the server closes or `patience` passes.
http_answer exchange(const boost::asio::ip::tcp::endpoint& server, const std::string& request) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect(server);
  const int fd = s.native_handle();
  std::thread sender([fd, &request] {
    for (std::size_t sent = 0; sent < request.size();) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
    shutdown(fd, SHUT_WR);
  });
  std::string text;
  http_answer answer;
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(give_up - std::chrono::steady_clock::now());
    pollfd watched{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&watched, 1, static_cast<int>(left.count())) <= 0) break;
    char chunk[16384];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) {
      answer.ended = n == 0;
      answer.reset = n < 0 && errno == ECONNRESET;
      break;
    }
    text.append(chunk, static_cast<std::size_t>(n));
  }
  sender.join();
  const std::size_t end_of_head = text.find("\r\n\r\n");
  answer.head = text.substr(0, end_of_head == std::string::npos ? text.size() : end_of_head + 2);
  if (end_of_head != std::string::npos) answer.body = text.substr(end_of_head + 4);
  return answer;
}

// The answer is `status_line`, whole (its body as long as its Content-Length) and ended without a reset.
void check_answer(const http_answer& a, const std::string& status_line) {
  BOOST_CHECK_MESSAGE(a.head.find(status_line + "\r\n") == 0, "expected " << status_line << ", got: " << a.head);
  BOOST_CHECK_MESSAGE(a.ended, "the connection was " << (a.reset ? "reset" : "not closed") << " after: " << a.head);
  BOOST_CHECK_EQUAL(a.field("Content-Length"), std::to_string(a.body.size()));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipeline_metrics_http, server_fixture)

BOOST_AUTO_TEST_CASE(head_is_answered_like_get_with_the_same_header_and_no_body) {
  start();
  const http_answer get = exchange(srv->metrics_endpoint(), "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
  const http_answer head = exchange(srv->metrics_endpoint(), "HEAD /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
  check_answer(get, "HTTP/1.1 200 OK");
  BOOST_CHECK_MESSAGE(head.head.find("HTTP/1.1 200 OK\r\n") == 0, head.head);
  BOOST_CHECK(head.ended);
  BOOST_CHECK_EQUAL(head.head, get.head);  // the same fields, the Content-Length of the body a GET gets
  BOOST_CHECK_EQUAL(head.field("Content-Length"), std::to_string(get.body.size()));
  BOOST_CHECK_EQUAL(head.body, "");
  BOOST_CHECK(get.body.find("pipeline_requests_total{") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_target_in_absolute_form_is_served_like_one_in_origin_form) {
  start();
  const std::string authority = "127.0.0.1:" + std::to_string(srv->metrics_endpoint().port());
  const http_answer a = exchange(srv->metrics_endpoint(),
                                 "GET http://" + authority + "/metrics?name=x HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  check_answer(a, "HTTP/1.1 200 OK");
  BOOST_CHECK(a.body.find("pipeline_requests_total{") != std::string::npos);
  BOOST_CHECK_EQUAL(a.field("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  check_answer(exchange(srv->metrics_endpoint(), "GET HTTP://" + authority + "/other HTTP/1.1\r\nHost: x\r\n\r\n"),
               "HTTP/1.1 404 Not Found");
  check_answer(exchange(srv->metrics_endpoint(), "GET http://" + authority + " HTTP/1.1\r\nHost: x\r\n\r\n"),
               "HTTP/1.1 404 Not Found");  // its path is "/"
}

BOOST_AUTO_TEST_CASE(a_post_with_a_100_kB_body_gets_405_after_its_body_is_read_and_no_reset) {
  start();
  const std::string body(100 * 1000, 'x');
  const http_answer a = exchange(srv->metrics_endpoint(), "POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: " +
                                                              std::to_string(body.size()) + "\r\n\r\n" + body);
  check_answer(a, "HTTP/1.1 405 Method Not Allowed");
  BOOST_CHECK_EQUAL(a.field("Allow"), "GET, HEAD");
  // The same body in chunks, announced with Expect: 100-continue, which the server confirms first.
  const http_answer chunked = exchange(
      srv->metrics_endpoint(), "PUT /metrics HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nTransfer-Encoding: "
                               "chunked\r\n\r\n186a0\r\n" + body + "\r\n0\r\n\r\n");
  BOOST_CHECK_MESSAGE(chunked.head == "HTTP/1.1 100 Continue\r\n", chunked.head);
  BOOST_CHECK_MESSAGE(chunked.body.find("HTTP/1.1 405 Method Not Allowed\r\n") == 0, chunked.body);
  BOOST_CHECK(chunked.ended);
}

BOOST_AUTO_TEST_CASE(a_request_line_of_1_MiB_gets_431_and_no_reset) {
  start();
  const http_answer a = exchange(srv->metrics_endpoint(),
                                 "GET /" + std::string(std::size_t{1} << 20, 'a') + " HTTP/1.1\r\nHost: test\r\n\r\n");
  check_answer(a, "HTTP/1.1 431 Request Header Fields Too Large");
}

BOOST_AUTO_TEST_CASE(a_request_that_is_not_http_gets_400_and_no_reset) {
  start();
  const http_answer a = exchange(srv->metrics_endpoint(), "\x16\x03\x01\x02\x00 hello\r\n\r\n"s);
  check_answer(a, "HTTP/1.1 400 Bad Request");
}

BOOST_AUTO_TEST_SUITE_END()
