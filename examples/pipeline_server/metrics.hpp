// The server's counters, and their Prometheus text exposition (format 0.0.4) for the metrics port.
// Counters are atomics updated by the connections' strands; a scrape reads them without stopping anyone.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "examples/pipeline_server/buffer_pool.hpp"
#include "examples/pipeline_server/lane_pool.hpp"
#include "examples/pipeline_server/payload_gate.hpp"
#include "examples/pipeline_server/protocol.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::pipeline {

// Why a connection's request or connection failed (pipeline_errors_total{kind=...}).
enum class error_kind : std::size_t {
  truncated,          // the client ended its side mid-frame
  bad_magic,
  unknown_operation,
  too_large,
  disconnected,       // the connection broke (reset, or closed while its reply was written)
  write_timeout,      // the client did not read its reply within the write deadline
  deadline_exceeded,  // a request ran past its deadline
  gpu_error,
  shutting_down,      // a request arrived after the shutdown began and was not run
  header_timeout,     // no whole request header within the header deadline: the connection was closed
  no_next_stage,      // a forward to a server without a next stage
  next_stage_failed,  // a forward whose next stage was gone or answered an error
  payload_too_slow,   // a payload slower than the minimum rate: ended with deadline_exceeded, connection closed
  count,
};
std::string_view to_string(error_kind kind) noexcept;

// The port whose accept failed, and why (pipeline_accept_errors_total{port,reason}).
enum class accept_port : std::size_t { requests, metrics, count };
enum class accept_failure : std::size_t {
  descriptors,  // the process or the system is out of file descriptors (EMFILE, ENFILE)
  memory,       // the kernel is out of socket buffers or memory (ENOBUFS, ENOMEM)
  other,
  count,
};
std::string_view to_string(accept_port port) noexcept;
std::string_view to_string(accept_failure failure) noexcept;

class server_metrics {
 public:
  // Upper bounds of the latency histogram's buckets, in seconds (then +Inf): 100 us to 10 s.
  static constexpr std::array<double, 14> latency_bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                            0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   10.0};

  // A finished request: its operation, how it ended, and the time from its header to its reply sent.
  void record_request(operation op, status outcome, std::chrono::steady_clock::duration latency) noexcept;
  void record_error(error_kind kind) noexcept { errors_[static_cast<std::size_t>(kind)].fetch_add(1); }
  void add_bytes_in(std::uint64_t bytes) noexcept { bytes_in_.fetch_add(bytes); }
  void add_bytes_out(std::uint64_t bytes) noexcept { bytes_out_.fetch_add(bytes); }
  // A connection admitted under the limit.
  void connection_opened() noexcept {
    connections_total_.fetch_add(1);
    connections_open_.fetch_add(1);
  }
  void connection_closed() noexcept { connections_open_.fetch_sub(1); }
  // A connection over the limit, answered `busy` and closed (not among those opened).
  void connection_refused() noexcept { connections_refused_.fetch_add(1); }
  // A connection to `port` accepted only to be refused: on the request port answered `busy` (counted
  // with those over the limit), on the metrics port answered 503.
  void connection_refused(accept_port port) noexcept {
    (port == accept_port::requests ? connections_refused_ : scrapes_refused_).fetch_add(1);
  }
  void accept_failed(accept_port port, accept_failure failure) noexcept { accept_errors_[index(port, failure)].fetch_add(1); }
  // A connection to the metrics port admitted under its cap, and its end.
  void scrape_opened() noexcept { scrapes_open_.fetch_add(1); }
  void scrape_closed() noexcept { scrapes_open_.fetch_sub(1); }

  std::uint64_t requests(status outcome) const noexcept;
  std::uint64_t errors(error_kind kind) const noexcept { return errors_[static_cast<std::size_t>(kind)].load(); }
  std::int64_t connections_open() const noexcept { return connections_open_.load(); }
  std::uint64_t connections_refused() const noexcept { return connections_refused_.load(); }
  std::uint64_t received_bytes() const noexcept { return bytes_in_.load(); }
  std::uint64_t accept_errors(accept_port port, accept_failure failure) const noexcept {
    return accept_errors_[index(port, failure)].load();
  }
  std::int64_t scrapes_open() const noexcept { return scrapes_open_.load(); }
  std::uint64_t scrapes_refused() const noexcept { return scrapes_refused_.load(); }

  // The exposition: every counter, the histogram, and the gauges given (memory and lane occupancy, the
  // large payloads' gate when there is one, the planner's decisions when the stage has a planner). `stage` labels the series (ferry, thread_pool).
  std::string render(std::string_view stage, const buffer_pool::occupancy& memory, const lane_pool::occupancy& lanes,
                     const std::optional<payload_gate::occupancy>& large_payloads,
                     const std::optional<ferry::plan_counts>& plans) const;

 private:
  // Statuses by value, up to the last one (busy answers a connection, never a request: not rendered).
  static constexpr std::size_t statuses = static_cast<std::size_t>(status::next_stage_failed) + 1;
  static constexpr std::size_t operations = static_cast<std::size_t>(operation::forward);  // numbered from 1
  std::array<std::atomic<std::uint64_t>, statuses * operations> requests_{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(error_kind::count)> errors_{};
  std::array<std::atomic<std::uint64_t>, latency_bounds.size() + 1> latency_buckets_{};  // not cumulative
  std::atomic<std::uint64_t> latency_nanoseconds_{0};
  std::atomic<std::uint64_t> bytes_in_{0};
  std::atomic<std::uint64_t> bytes_out_{0};
  std::atomic<std::uint64_t> connections_total_{0};
  std::atomic<std::int64_t> connections_open_{0};
  std::atomic<std::uint64_t> connections_refused_{0};
  static constexpr std::size_t accept_failures = static_cast<std::size_t>(accept_failure::count);
  static constexpr std::size_t index(accept_port port, accept_failure failure) noexcept {
    return static_cast<std::size_t>(port) * accept_failures + static_cast<std::size_t>(failure);
  }
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(accept_port::count) * accept_failures> accept_errors_{};
  std::atomic<std::int64_t> scrapes_open_{0};
  std::atomic<std::uint64_t> scrapes_refused_{0};

  // The accept errors' and the metrics port's series.
  void write_accepts(std::ostream& out, const std::string& label) const;
};

}  // namespace ferry::pipeline
