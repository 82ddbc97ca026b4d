// The server's construction (its options checked, both ports bound, its threads started) and its
// graceful stop.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "examples/pipeline_server/accept_backoff.hpp"
#include "examples/pipeline_server/connection.hpp"
#include "examples/pipeline_server/next_stage.hpp"
#include "examples/pipeline_server/stage_listener.hpp"
#include "ferry/backend.hpp"
#include "ferry/context.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;

namespace ferry::pipeline {
namespace {

constexpr std::size_t max_payload_prefix_bytes = std::size_t{16} << 20;
// Slots are numbered in 32 bits on the wire; more than this would be memory, not concurrency.
constexpr std::size_t max_stage_slots = 4096;

tcp::endpoint endpoint_of(const std::string& address, unsigned short port) {
  boost::system::error_code error;
  const asio::ip::address ip = asio::ip::make_address(address, error);
  if (error) throw std::invalid_argument("pipeline server: address \"" + address + "\" is not an IP address");
  return {ip, port};
}

void check_stage_options(const server_options& o) {
  if (o.stage_slots == 0 || o.stage_slots > max_stage_slots) {
    throw std::invalid_argument("pipeline server: stage_slots (--stage-slots) " + std::to_string(o.stage_slots) +
                                " is not between 1 and " + std::to_string(max_stage_slots));
  }
  if (!o.next_stage.empty()) {
    try {
      (void)split_host_port(o.next_stage, "--next-stage");
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string("pipeline server: next_stage: ") + error.what());
    }
  }
  if (o.next_stage_connect_limit.count() <= 0) {
    throw std::invalid_argument("pipeline server: next_stage_connect_limit " +
                                std::to_string(o.next_stage_connect_limit.count()) + " ms must be positive");
  }
  if (o.stage_port && o.stage_memory == remote::memory_kind::device && active_backend() == backend::sim) {
    throw std::invalid_argument(
        "pipeline server: stage_memory (--stage-memory) device cannot be used on the sim backend: its device memory "
        "is not host-addressable, so UCX cannot reach it (use host)");
  }
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
  if (o.max_connections == 0u) throw std::invalid_argument("pipeline server: max_connections is 0");
  if (o.max_metrics_connections == 0) throw std::invalid_argument("pipeline server: max_metrics_connections is 0");
  if (o.gpu_lanes == 0) throw std::invalid_argument("pipeline server: gpu_lanes is 0");
  // 0 would lease on the header alone; more than a few MiB per connection is memory outside the budget.
  if (o.payload_prefix_bytes == 0 || o.payload_prefix_bytes > max_payload_prefix_bytes) {
    throw std::invalid_argument("pipeline server: payload_prefix_bytes " + std::to_string(o.payload_prefix_bytes) +
                                " is not between 1 and " + std::to_string(max_payload_prefix_bytes));
  }
  if (o.large_payloads_at_once > 0 && o.large_payload_bytes == 0) {
    throw std::invalid_argument("pipeline server: large_payload_bytes is 0 with large_payloads_at_once " +
                                std::to_string(o.large_payloads_at_once) +
                                ": every request, however small, would wait for the gate");
  }
  check_stage_options(o);
}

}  // namespace

std::string default_stage_transports() {
  return active_backend() == backend::sim ? "tcp,sm,self" : "cuda_ipc,cuda_copy,tcp,sm,self";
}

remote::memory_kind default_stage_memory() {
  return active_backend() == backend::sim ? remote::memory_kind::host : remote::memory_kind::device;
}

remote::memory_kind parse_memory_kind(const std::string& text, const std::string& option) {
  if (text == "device") return remote::memory_kind::device;
  if (text == "host") return remote::memory_kind::host;
  throw std::invalid_argument(option + " \"" + text + "\" is not a memory kind: device or host");
}

std::pair<std::string, unsigned short> split_host_port(const std::string& host_port, const std::string& option) {
  const std::size_t colon = host_port.rfind(':');
  const auto malformed = [&](const std::string& why) {
    return std::invalid_argument(option + " \"" + host_port + "\" is not HOST:PORT: " + why);
  };
  if (colon == std::string::npos || colon == 0) throw malformed("no host before a ':'");
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw malformed("the port \"" + port + "\" is not a number");
  }
  const unsigned long number = std::stoul(port);
  if (number == 0 || number > 65535) throw malformed("the port " + port + " is not between 1 and 65535");
  return {host, static_cast<unsigned short>(number)};
}

server::server(server_options options, const stage_factory& make_stage)
    : options_((check_options(options), std::move(options))),
      control_(asio::make_strand(io_)),
      acceptor_(control_),
      metrics_acceptor_(control_),
      connection_limit_(fit_max_connections(options_, open_files_limit())) {
  spare_ = std::make_unique<spare_descriptor>();
  accepts_ = std::make_unique<accept_backoff>(acceptor_, *spare_, metrics_, accept_port::requests);
  metrics_accepts_ = std::make_unique<accept_backoff>(metrics_acceptor_, *spare_, metrics_, accept_port::metrics);
  stage_ = make_stage(io_.get_executor());
  lanes_ = std::make_unique<lane_pool>(*stage_, options_.gpu_lanes);
  if (options_.large_payloads_at_once > 0) large_gate_ = std::make_unique<payload_gate>(options_.large_payloads_at_once);
  growth_gate_ = std::make_unique<payload_gate>(options_.memory_budget_bytes);
  gpu_stage* const stage = stage_.get();
  pool_ = std::make_unique<buffer_pool>(
      options_.memory_budget_bytes, stage_->context(),
      buffer_pool::host_buffer_hooks{[stage](std::span<std::uint8_t> m) { return stage->adopt_host_buffer(m); },
                                     [stage](std::span<std::uint8_t> m) { stage->forget_host_memory(m); }});
  start_stage_links();
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
  if (stage_listener_) stage_listener_->start(control_, io_);
  if (next_stage_) next_stage_->start(io_);
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

std::optional<payload_gate::occupancy> server::large_payloads() const {
  if (!large_gate_) return std::nullopt;
  return large_gate_->current();
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
    accepts_->cancel();  // a loop waiting after a failed accept ends now, not at the end of its wait
    metrics_accepts_->cancel();
    grace_timer_ = std::make_unique<asio::steady_timer>(control_, options_.shutdown_grace);
    grace_timer_->async_wait([this](boost::system::error_code error) {
      if (error) return;
      close_connections(false);
      stop_stage_links();  // forwards still waiting for the next stage end now
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
  // Nothing left to wait for: neither the grace timer nor the stage links need keep the threads up.
  if (!any && grace_timer_) grace_timer_->cancel();
  if (!any) stop_stage_links();
}

// Before the io threads start: the worker listens on the stage port; the next stage is connected to
// (io_ runs on this thread meanwhile) and its window received.
void server::start_stage_links() {
  if (!options_.stage_port && options_.next_stage.empty()) return;
  const std::string transports =
      options_.stage_transports.empty() ? default_stage_transports() : options_.stage_transports;
  stage_worker_ = std::make_unique<remote::worker>(io_.get_executor(), remote::worker_options{transports});
  if (options_.stage_port) {
    stage_port_ = stage_worker_->listen(options_.address, *options_.stage_port);
    stage_listener_ = std::make_unique<stage_listener>(
        *stage_worker_, *stage_, *lanes_, *pool_,
        stage_listener::settings{options_.stage_slots, options_.max_payload_bytes,
                                 options_.stage_memory.value_or(default_stage_memory()), options_.request_deadline});
  }
  if (!options_.next_stage.empty()) {
    next_stage_ = next_stage::connect(*stage_worker_, io_,
                                      next_stage::settings{options_.next_stage, options_.stage_slots,
                                                           options_.max_payload_bytes, options_.next_stage_connect_limit});
  }
}

void server::stop_stage_links() {
  if (!stage_worker_) return;
  if (stage_listener_) stage_listener_->stop();
  stage_worker_.reset();  // closes the listener and every endpoint: their loops end
}

}  // namespace ferry::pipeline
