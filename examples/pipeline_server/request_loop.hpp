// Serving one connection: its requests, answered one after another on the connection's strand, each
// through the same steps: its header (within the header deadline), the header's checks, its payload (a
// prefix into the connection's own buffer, then a large payload's turn, then leases that grow with what
// arrives while the rest is read), its GPU step on a borrowed lane, its reply. A step that ends the request answers the
// client when it can still hear, and says whether the connection goes on.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "examples/pipeline_server/connection.hpp"
#include "examples/pipeline_server/server.hpp"

namespace ferry::pipeline {

class server::request_loop {
 public:
  // Serves `c` for `owner`; both outlive the loop (it lives in the connection's coroutine).
  request_loop(server& owner, connection& c);

  // Answers requests until the connection ends (the client leaves, a status that closes it, the
  // shutdown: a request already sent is answered shutting_down), then closes the socket.
  boost::asio::awaitable<void> run();

 private:
  using clock_type = std::chrono::steady_clock;
  struct request;

  // Whether bytes of a next request have arrived.
  bool request_waiting();
  // Shuts the sending side down and discards what the client sent unread before closing, so that the
  // kernel does not reset the connection and drop a reply not read yet.
  void close_without_reset() noexcept;
  // One request, header to reply; false when the connection ends with it.
  boost::asio::awaitable<bool> serve_one();
  boost::asio::awaitable<std::optional<request_header>> read_header();
  boost::asio::awaitable<std::optional<operation>> check(const request_header& header, clock_type::time_point started);
  boost::asio::awaitable<bool> read_payload(request& r);
  boost::asio::awaitable<bool> pass_gate(request& r);
  boost::asio::awaitable<bool> reserve_growth(request& r, std::size_t bytes);
  // A pair for `bytes` of the payload into `lease`; false, after the error reply, when there is none.
  boost::asio::awaitable<bool> lease_buffers(request& r, std::size_t bytes, lease_turn turn, buffer_lease& lease);
  // The payload's bytes [from, until) into the leased host buffer, under the step's minimum rate.
  boost::asio::awaitable<bool> read_step(request& r, std::size_t from, std::size_t until);
  boost::asio::awaitable<bool> grow_lease(request& r, std::size_t arrived);
  // `too_slow`: the step's minimum rate, not the request's deadline, ended the read.
  boost::asio::awaitable<void> payload_failed(request& r, boost::system::error_code error, std::size_t read,
                                              bool too_slow = false);
  boost::asio::awaitable<stage_outcome> run_on_gpu(request& r);
  boost::asio::awaitable<bool> reply(request& r, const stage_outcome& outcome);

  // Writes a reply under the write deadline; false when the connection is gone (counted as why).
  boost::asio::awaitable<bool> write_reply(const reply_header& header, boost::asio::const_buffer body);
  boost::asio::awaitable<bool> error_reply(status s, const std::string& message);
  // A request answered, for the metrics: only those whose reply was delivered are counted.
  void record(operation op, clock_type::time_point started, status s);

  server& owner_;
  connection& connection_;
  boost::asio::ip::tcp::socket& socket_;
  const boost::asio::any_io_executor strand_;
  // The first payload bytes of a request arrive here before it leases its buffers (kept for the next).
  std::vector<std::uint8_t> prefix_;
};

}  // namespace ferry::pipeline
