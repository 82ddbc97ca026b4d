// A blocking client of the pipeline protocol for the tests, and the expected reply to a request computed
// on the host from examples/pipeline_server/kernels/transform.hpp (the definition the server's kernel
// implements).
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "examples/pipeline_server/kernels/transform.hpp"
#include "examples/pipeline_server/protocol.hpp"

namespace ferry::testing {

struct expected_reply {
  std::vector<std::uint8_t> body;
  std::uint64_t checksum = 0;
};

// What the server must answer to `op` over `payload`, word by word as transform.hpp defines it.
inline expected_reply expected_for(pipeline::operation op, const std::vector<std::uint8_t>& payload) {
  namespace k = ferry::pipeline::kernels;
  expected_reply out;
  if (op == pipeline::operation::transform) out.body.resize(payload.size());
  for (std::size_t start = 0, j = 0; start < payload.size(); start += 8, ++j) {
    const std::size_t length = std::min<std::size_t>(8, payload.size() - start);
    std::uint64_t word = 0;
    std::memcpy(&word, payload.data() + start, length);
    if (op == pipeline::operation::transform) {
      word = k::transform_word(word, j) & k::partial_word_mask(length);
      std::memcpy(out.body.data() + start, &word, length);
    }
    out.checksum += k::checksum_term(word, j);
  }
  return out;
}

struct reply {
  pipeline::reply_header header;
  std::vector<std::uint8_t> body;
  std::string text() const { return std::string(body.begin(), body.end()); }
};

class client {
 public:
  explicit client(const boost::asio::ip::tcp::endpoint& server, int receive_buffer_bytes = 0) : socket_(io_) {
    socket_.open(server.protocol());
    // Set before connecting, so that the window the server sees is small from the start.
    if (receive_buffer_bytes > 0) socket_.set_option(boost::asio::socket_base::receive_buffer_size(receive_buffer_bytes));
    socket_.connect(server);
  }

  void send_raw(const void* data, std::size_t bytes) { boost::asio::write(socket_, boost::asio::buffer(data, bytes)); }
  void send_header(std::uint32_t op, std::uint64_t length, std::uint32_t magic = pipeline::request_magic) {
    const auto head = pipeline::encode(pipeline::request_header{magic, op, length});
    send_raw(head.data(), head.size());
  }
  void send_request(pipeline::operation op, const std::vector<std::uint8_t>& payload) {
    send_header(static_cast<std::uint32_t>(op), payload.size());
    send_raw(payload.data(), payload.size());
  }
  // No more bytes from this side (the server then sees the end of the stream).
  void finish_sending() { socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_send); }
  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  reply read_reply() {
    std::array<std::byte, pipeline::reply_header_bytes> head;
    boost::asio::read(socket_, boost::asio::buffer(head));
    reply r{pipeline::decode_reply(head), {}};
    r.body.resize(r.header.length);
    boost::asio::read(socket_, boost::asio::buffer(r.body));
    return r;
  }
  // Reads at most `bytes` bytes of whatever comes.
  std::size_t read_some(std::size_t bytes) {
    std::vector<std::uint8_t> sink(bytes);
    return socket_.read_some(boost::asio::buffer(sink));
  }
  // Reads at most `bytes` into `into`; `error` says how the stream ended when nothing was read.
  std::size_t read_some_into(void* into, std::size_t bytes, boost::system::error_code& error) {
    return socket_.read_some(boost::asio::buffer(into, bytes), error);
  }
  // Whether something (bytes, the end of the stream) can be read within `limit`: a bound on waiting for
  // a server that might never answer.
  bool readable_within(std::chrono::milliseconds limit) {
    pollfd watched{socket_.native_handle(), POLLIN, 0};
    return ::poll(&watched, 1, static_cast<int>(limit.count())) > 0;
  }
  // Whether the server has closed the connection: the next read ends (end of stream or reset).
  bool closed_by_server() {
    std::uint8_t byte;
    boost::system::error_code error;
    const std::size_t n = socket_.read_some(boost::asio::buffer(&byte, 1), error);
    return n == 0 && (error == boost::asio::error::eof || error == boost::asio::error::connection_reset);
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
};

// The whole answer (status line, headers, body) of an HTTP/1.0 request (`method` `path`, no body), as
// a scraper would read it.
inline std::string http_request(const boost::asio::ip::tcp::endpoint& server, const std::string& method,
                                const std::string& path) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect(server);
  boost::asio::write(s, boost::asio::buffer(method + " " + path + " HTTP/1.0\r\nHost: test\r\n\r\n"));
  std::string text;
  boost::system::error_code end;
  boost::asio::read(s, boost::asio::dynamic_buffer(text), end);  // until the server closes
  return text;
}

inline std::string http_get(const boost::asio::ip::tcp::endpoint& server, const std::string& path) {
  return http_request(server, "GET", path);
}

}  // namespace ferry::testing
