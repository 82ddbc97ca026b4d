// The server's construction (its options checked, both ports bound, its threads started) and its
// graceful stop.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <stdexcept>
#include <string>
#include <tuple>

#include "examples/pipeline_server/connection.hpp"
#include "ferry/context.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {
namespace {

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

}  // namespace

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

}  // namespace ferry::pipeline
