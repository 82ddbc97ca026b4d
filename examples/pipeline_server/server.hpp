// The pipeline server: Asio TCP, one coroutine per connection, requests answered in order on each
// connection and connections served concurrently by a pool of io threads. Each request's payload goes
// through a gpu_stage (ferry_stage.hpp: ferry's engine) and the result comes back with its checksum.
// The wire protocol is protocol.hpp; the README of this folder describes running it.
//
// Bounded, whatever the clients do:
// - connections: at most max_connections are served; one over the limit gets a `busy` reply and is
//   closed. A connection that does not deliver a whole request header within header_deadline (from
//   connecting, or from its last reply) is closed, so silent or trickling clients cannot pile up.
//   max_connections fits under the process's open-files limit (checked at start), and when descriptors
//   run out all the same the accept loops wait and retry instead of spinning, and a spare descriptor
//   lets one waiting client be told `busy` (accept_backoff.hpp). The metrics port answers at most
//   max_metrics_connections at once.
// - memory: every request leases its buffers from a buffer_pool, but only once the first
//   payload_prefix_bytes of its payload (or all of a shorter one) have arrived, into a small buffer of
//   the connection: a header alone, announcing however much, reserves nothing. Then what it leases grows
//   with what arrived: a pair of at most lease_growth times the bytes in (copied into the next pair
//   when full), so a client that stalls mid-payload holds little; such a request first reserves the
//   room to grow to its whole payload (growth_gate_, in bytes of the budget), so that growing requests
//   never all wait for each other. Each step's bytes must arrive at min_payload_bytes_per_second (after
//   a second of slack) or the request ends. When the budget is spent connections stop reading instead of
//   allocating.
// - GPU lanes (streams): a lane_pool of gpu_lanes lanes shared by all connections; a request borrows one
//   for its GPU step only, waiting asynchronously when all are busy.
// - large payloads: requests of at least large_payload_bytes go past their payload's prefix at most
//   large_payloads_at_once at a time, in arrival order (payload_gate.hpp), until their reply is written.
// Stage to stage (README "Stage to stage"): with a stage port, previous stages connect over
// ferry::remote and hand this server transformed payloads to checksum (stage_listener.hpp); with a next
// stage, operation forward transforms a payload here and hands it on (next_stage.hpp). One UCX worker
// serves both, on the server's io_context; it goes when the shutdown has no connection left to wait for.
//
// Bad input (a bad magic, an unknown operation, a length over the maximum, a frame cut short) gets an
// error reply and the connection is closed; a client that breaks the connection or does not read its
// replies (write deadline) loses its connection. Nothing it held stays held: the lease and the lane are
// given back on every path out of a request, and the connection's slot when its coroutine ends.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples/pipeline_server/buffer_pool.hpp"
#include "examples/pipeline_server/gpu_stage.hpp"
#include "examples/pipeline_server/lane_pool.hpp"
#include "examples/pipeline_server/metrics.hpp"
#include "examples/pipeline_server/payload_gate.hpp"
#include "ferry/remote.hpp"

namespace ferry::pipeline {

struct server_options {
  std::string address = "127.0.0.1";
  unsigned short port = 0;          // 0: an ephemeral port (server::endpoint() tells which)
  unsigned short metrics_port = 0;  // the Prometheus text endpoint; 0: ephemeral
  std::size_t max_payload_bytes = std::size_t{256} << 20;
  // Host and device buffer bytes leased or kept for reuse (each pair counted once); at least the buffer
  // class of max_payload_bytes, so that every admissible request can run.
  std::size_t memory_budget_bytes = std::size_t{2} << 30;
  std::chrono::milliseconds request_deadline{30000};  // from a request's header to its result
  // For a whole request header to arrive, from connecting or from the previous reply; then closed.
  std::chrono::milliseconds header_deadline{10000};
  std::chrono::milliseconds write_deadline{10000};    // for writing one reply
  std::chrono::milliseconds shutdown_grace{10000};    // in-flight requests may finish within this
  std::size_t io_threads = 4;
  // Connections served at once; more are answered `busy` and closed. Nothing: default_max_connections,
  // lowered at start to what the open-files limit leaves room for (fit_max_connections).
  std::optional<std::size_t> max_connections;
  // Connections to the metrics port answered at once; more are answered 503 and closed.
  std::size_t max_metrics_connections = 16;
  // GPU lanes (streams for ferry's stage) shared by all connections: enough that busy connections rarely
  // wait for one, few enough that a thousand connections do not make a thousand streams.
  std::size_t gpu_lanes = 64;
  // Payload bytes that must have arrived (into a buffer of the connection, outside the budget) before a
  // request leases its buffers: at most this much per connection is held for a client that sends a
  // header and no payload, instead of a lease of the announced length.
  std::size_t payload_prefix_bytes = std::size_t{64} << 10;
  // After its prefix, a payload's bytes arrive in steps (each filling the pair leased so far); a step of
  // n bytes must be in within a second plus n at this rate, or the request ends with deadline_exceeded
  // and its connection is closed: a client cannot keep memory by trickling. 0: no minimum.
  std::size_t min_payload_bytes_per_second = std::size_t{64} << 10;
  // Requests whose payload is at least large_payload_bytes: at most large_payloads_at_once of them are
  // past their prefix at a time (read, on the GPU, being answered); the next waits, in arrival order and
  // under its deadline, before it leases its buffers. Without such a limit every large request shares
  // the link with all the others and the largest take longest (payload_gate.hpp). 0: no limit.
  std::size_t large_payload_bytes = std::size_t{1} << 20;
  std::size_t large_payloads_at_once = 16;

  // Stage to stage. The port previous stages connect to (nothing: none; 0: an ephemeral one, which
  // server::stage_port() tells); each gets a window of stage_slots slots of max_payload_bytes.
  std::optional<unsigned short> stage_port;
  // HOST:PORT of the next stage's stage port; empty: none, and forward answers no_next_stage.
  std::string next_stage;
  // Forwards in flight to the next stage at most; and the slots of each previous stage's window.
  std::size_t stage_slots = 8;
  // UCX's transports for the stage links; empty: default_stage_transports().
  std::string stage_transports;
  // The memory of the windows previous stages put into; nothing: default_stage_memory().
  std::optional<remote::memory_kind> stage_memory;
  // For connecting to the next stage and receiving its window, at start.
  std::chrono::milliseconds next_stage_connect_limit{5000};
};

// The backend's defaults: on cuda, device memory reached over cuda_ipc and cuda_copy (and the host
// transports); on sim host memory (its device memory is not host-addressable, so UCX cannot reach it)
// over tcp, sm and self.
std::string default_stage_transports();
remote::memory_kind default_stage_memory();
// "device" or "host"; std::invalid_argument naming `option` and the value otherwise.
remote::memory_kind parse_memory_kind(const std::string& text, const std::string& option);
// HOST:PORT (HOST a name or an address, [v6] in brackets) split in two; std::invalid_argument naming
// `option` and the value when it is not of that form or the port is not 1 to 65535.
std::pair<std::string, unsigned short> split_host_port(const std::string& host_port, const std::string& option);

// max_connections when none is given, unless the open-files limit leaves room for fewer.
inline constexpr std::size_t default_max_connections = 1024;
// The descriptors the server needs beside its connections: the two listening sockets, the spare, the
// metrics port's connections and room for the rest of the process (standard streams, the io_context,
// the engine, UCX's stage links).
std::size_t descriptors_beside_connections(const server_options& options) noexcept;
// The soft RLIMIT_NOFILE of the process (the largest std::size_t when unlimited).
std::size_t open_files_limit() noexcept;
struct connection_limit {
  std::size_t max_connections = 0;
  std::string notice;  // why the default was lowered; empty when it was not
};
// The max_connections a server with `options` runs with under an open-files limit of `open_files`: the
// value given, or the default lowered to fit. std::invalid_argument naming the option, the value and the
// limit when a value given does not fit beside descriptors_beside_connections(), or nothing does.
connection_limit fit_max_connections(const server_options& options, std::size_t open_files);

class next_stage;
class stage_listener;
class spare_descriptor;
class accept_backoff;

class server {
 public:
  using stage_factory = std::function<std::unique_ptr<gpu_stage>(boost::asio::any_io_executor)>;

  // Checks the options (std::invalid_argument naming the option and its value), builds the stage on
  // the server's executor, binds both ports (boost::system::system_error when it cannot) and starts
  // serving on options.io_threads threads.
  server(server_options options, const stage_factory& make_stage);
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  // shutdown(), then wait().
  ~server();

  boost::asio::ip::tcp::endpoint endpoint() const { return endpoint_; }
  boost::asio::ip::tcp::endpoint metrics_endpoint() const { return metrics_endpoint_; }
  // The stage port bound (0 without one).
  unsigned short stage_port() const noexcept { return stage_port_; }

  // Graceful stop, from any thread, any number of times: no new connections; idle connections are
  // closed; requests in flight finish and get their replies, up to options.shutdown_grace, after which
  // their connections are closed too. Returns at once; wait() returns when all of it is done.
  void shutdown();
  void wait();

  std::string metrics_text() const;
  const server_metrics& metrics() const noexcept { return metrics_; }
  buffer_pool::occupancy memory() const { return pool_->current(); }
  lane_pool::occupancy lanes() const { return lanes_->current(); }
  // Large payloads inside the gate and waiting (nothing when large_payloads_at_once is 0).
  std::optional<payload_gate::occupancy> large_payloads() const;
  const gpu_stage& stage() const noexcept { return *stage_; }
  // The connections it serves at once (fit_max_connections), and why that is fewer than the default
  // (empty when it is not): the command prints it.
  std::size_t max_connections() const noexcept { return connection_limit_.max_connections; }
  const std::string& start_notice() const noexcept { return connection_limit_.notice; }

 private:
  struct connection;   // connection.hpp
  class request_loop;  // request_loop.hpp: serves one connection's requests
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> serve(std::shared_ptr<connection> c);
  boost::asio::awaitable<void> refuse(boost::asio::ip::tcp::socket socket);
  boost::asio::awaitable<void> metrics_loop();
  boost::asio::awaitable<void> answer_scrape(boost::asio::ip::tcp::socket socket);
  void close_connections(bool idle_only);
  void start_stage_links();
  // On control_: no more previous stages, and the link to the next one closed (the worker goes).
  void stop_stage_links();

  const server_options options_;
  boost::asio::io_context io_;
  std::unique_ptr<gpu_stage> stage_;
  std::unique_ptr<buffer_pool> pool_;
  std::unique_ptr<lane_pool> lanes_;  // after stage_: its lanes are closed before the stage goes
  std::unique_ptr<payload_gate> large_gate_;  // null when large_payloads_at_once is 0
  // The room growing payloads reserved, in bytes of the memory budget (see request_loop's lease steps).
  std::unique_ptr<payload_gate> growth_gate_;
  // After the pools and the stage, which the stage links use; the worker on io_, before them.
  std::unique_ptr<remote::worker> stage_worker_;  // reset on control_ by stop_stage_links()
  std::unique_ptr<stage_listener> stage_listener_;
  std::shared_ptr<next_stage> next_stage_;
  unsigned short stage_port_ = 0;
  server_metrics metrics_;
  // Runs the acceptors, the connection list and the grace timer.
  boost::asio::strand<boost::asio::io_context::executor_type> control_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::ip::tcp::acceptor metrics_acceptor_;
  boost::asio::ip::tcp::endpoint endpoint_;
  boost::asio::ip::tcp::endpoint metrics_endpoint_;
  connection_limit connection_limit_;
  // The accept loops' way through failed accepts (accept_backoff.hpp), one spare descriptor for both.
  std::unique_ptr<spare_descriptor> spare_;
  std::unique_ptr<accept_backoff> accepts_;
  std::unique_ptr<accept_backoff> metrics_accepts_;
  std::atomic<bool> stopping_{false};
  std::list<std::weak_ptr<connection>> connections_;
  std::unique_ptr<boost::asio::steady_timer> grace_timer_;
  std::vector<std::thread> threads_;
};

}  // namespace ferry::pipeline
