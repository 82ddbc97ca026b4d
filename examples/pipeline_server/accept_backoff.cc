#include "examples/pipeline_server/accept_backoff.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/system/errc.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "examples/pipeline_server/awaitable_tuple.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {
namespace {

// What turn_away reads of a refused client's bytes at most: what had arrived with its connection.
constexpr std::size_t turn_away_drain_bytes = 64 << 10;

}  // namespace

spare_descriptor::spare_descriptor() noexcept { restore(); }

spare_descriptor::~spare_descriptor() { release(); }

bool spare_descriptor::release() noexcept {
  if (fd_ < 0) return false;
  ::close(fd_);
  fd_ = -1;
  return true;
}

bool spare_descriptor::restore() noexcept {
  if (fd_ < 0) fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

void turn_away(tcp::socket& socket, std::string_view refusal) noexcept {
  boost::system::error_code error;
  socket.non_blocking(true, error);
  socket.send(asio::buffer(refusal.data(), refusal.size()), 0, error);
  socket.shutdown(tcp::socket::shutdown_send, error);
  std::array<char, 4096> sink;
  for (std::size_t drained = 0; drained < turn_away_drain_bytes;) {
    const std::size_t read = socket.receive(asio::buffer(sink), 0, error);
    if (error || read == 0) break;  // would_block: nothing more had arrived
    drained += read;
  }
  socket.close(error);
}

accept_failure accept_failure_of(const boost::system::error_code& error) noexcept {
  namespace errc = boost::system::errc;
  if (error == errc::too_many_files_open || error == errc::too_many_files_open_in_system) {
    return accept_failure::descriptors;
  }
  if (error == errc::no_buffer_space || error == errc::not_enough_memory) return accept_failure::memory;
  return accept_failure::other;
}

accept_backoff::accept_backoff(tcp::acceptor& acceptor, spare_descriptor& spare, server_metrics& metrics,
                               accept_port port)
    : acceptor_(acceptor), spare_(spare), metrics_(metrics), port_(port), timer_(acceptor.get_executor()) {}

asio::awaitable<std::tuple<boost::system::error_code, tcp::socket>> accept_backoff::accept(
    asio::any_io_executor executor, std::string_view refusal) {
  for (;;) {
    auto [error, socket] = co_await acceptor_.async_accept(executor, awaitable_tuple);
    if (!error) {
      delay_ = first_delay;
      spare_.restore();  // a turn_away that could not take it back: descriptors are there again
      co_return std::tuple{error, std::move(socket)};
    }
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) co_return std::tuple{error, std::move(socket)};
    const accept_failure failure = accept_failure_of(error);
    metrics_.accept_failed(port_, failure);
    if (failure == accept_failure::descriptors) turn_one_away(refusal);
    // Whatever failed is likely to fail again at once (EMFILE does even with no connection waiting).
    timer_.expires_after(delay_);
    delay_ = std::min(delay_ * 2, longest_delay);
    co_await timer_.async_wait(awaitable_tuple);  // cancelled: the acceptor is closing, the next accept says so
  }
}

void accept_backoff::cancel() { timer_.cancel(); }

// Only a connection already waiting is taken: the acceptor does not block here, where it would hold the
// strand that runs both accept loops.
void accept_backoff::turn_one_away(std::string_view refusal) {
  if (!spare_.release()) return;
  boost::system::error_code error;
  tcp::socket socket(acceptor_.get_executor());
  acceptor_.non_blocking(true, error);
  if (!error) acceptor_.accept(socket, error);
  boost::system::error_code ignored;
  acceptor_.non_blocking(false, ignored);
  if (!error) {
    metrics_.connection_refused(port_);
    turn_away(socket, refusal);
  }
  spare_.restore();
}

}  // namespace ferry::pipeline
