// What the server's accept loops do when an accept fails, so that running out of file descriptors (or
// of kernel memory) neither spins a loop nor ends the service. Without it a loop that retries at once
// finds the same error at once: an accept fails with EMFILE even when no connection is waiting, so the
// loop burns a core and serves nothing else on its strand.
// - The loop waits before accepting again: first_delay, doubling up to longest_delay, and back to
//   first_delay after an accept that succeeds.
// - Out of descriptors, the spare descriptor (one for the whole server) is closed, one waiting connection
//   is accepted in its place, told why (the port's refusal: `busy`, or HTTP 503) and closed, and the
//   spare is opened again: a client learns that the server is out of descriptors instead of waiting in
//   the backlog until it gives up.
// - Every failure is counted (server_metrics::accept_failed, pipeline_accept_errors_total).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <string_view>
#include <tuple>

#include "examples/pipeline_server/metrics.hpp"

namespace ferry::pipeline {

// A descriptor held in reserve (/dev/null) so that one can be freed when the process has none left.
// Not thread-safe: used on the strand that runs the accept loops.
class spare_descriptor {
 public:
  // Opens it; a process already out of descriptors starts without one (restore() tries again).
  spare_descriptor() noexcept;
  spare_descriptor(const spare_descriptor&) = delete;
  spare_descriptor& operator=(const spare_descriptor&) = delete;
  ~spare_descriptor();

  bool held() const noexcept { return fd_ >= 0; }
  // Closes it, so that the next descriptor the process opens can be had; false when none was held.
  bool release() noexcept;
  // Opens it when not held; false when the process is still out of descriptors.
  bool restore() noexcept;

 private:
  int fd_ = -1;
};

// For a connection just accepted that the server will not serve: writes `refusal` without waiting (a
// short message fits a new connection's send buffer), ends the sending side, reads and drops what the
// client had already sent (so that the close does not reset the connection over unread bytes and lose
// the refusal with it), and closes the socket. Never throws.
void turn_away(boost::asio::ip::tcp::socket& socket, std::string_view refusal) noexcept;

class accept_backoff {
 public:
  static constexpr std::chrono::milliseconds first_delay{10};
  static constexpr std::chrono::milliseconds longest_delay{1000};

  // `acceptor` and `spare` must outlive it; both, and it, are used on `acceptor`'s executor only.
  accept_backoff(boost::asio::ip::tcp::acceptor& acceptor, spare_descriptor& spare, server_metrics& metrics,
                 accept_port port);

  // The next connection to serve, on a socket of `executor`.
  // Completion: (error_code, socket); an error only once the acceptor is closed (operation_aborted or
  // bad_descriptor): every other failure is counted, turned into a wait as above, and the accept tried
  // again. Out of descriptors, a waiting connection is written `refusal` (turn_away) and closed.
  // Per-operation cancellation: none; cancel() ends a back-off wait, and closing the acceptor ends it.
  // Lifetime of arguments: `refusal` must stay valid until the operation completes.
  // Which thread runs it: the acceptor's executor (the caller's coroutine must run there too).
  boost::asio::awaitable<std::tuple<boost::system::error_code, boost::asio::ip::tcp::socket>> accept(
      boost::asio::any_io_executor executor, std::string_view refusal);

  // Ends a back-off wait in progress, so that a loop whose acceptor was just closed finishes at once.
  // On the acceptor's executor.
  void cancel();

 private:
  void turn_one_away(std::string_view refusal);

  boost::asio::ip::tcp::acceptor& acceptor_;
  spare_descriptor& spare_;
  server_metrics& metrics_;
  accept_port port_;
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds delay_ = first_delay;
};

// Which accept_failure an accept's error is.
accept_failure accept_failure_of(const boost::system::error_code& error) noexcept;

}  // namespace ferry::pipeline
