// The pipeline server's load generator: N connections, each sending requests one after another (a
// fixed count, or until a duration has passed) with payload sizes fixed or spread log-uniformly over a
// range, and checking every reply: status, length, every byte of the result against the transform
// computed here (examples/pipeline_server/kernels/transform.hpp), and the checksum. With `forward` the
// requests are forwards instead of transforms (stage to stage): their replies carry no body, and their
// checksum must be that of the transformed payload. Reports throughput and latency percentiles.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::pipeline {

struct load_options {
  boost::asio::ip::tcp::endpoint server;
  std::size_t connections = 64;
  std::size_t requests_per_connection = 0;  // 0: until `duration` has passed
  std::chrono::milliseconds duration{45000};
  std::size_t min_bytes = 4096;  // min == max: every payload has that size
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t checksum_every = 8;  // every Nth request asks for the checksum only (0: none do)
  bool forward = false;            // the others are forwards (to the server's next stage), not transforms
  std::size_t threads = 4;         // client io threads (they also check the replies)
  std::uint64_t seed = 1;
  std::string label = "load";  // the progress line's name; empty: no progress line
};

struct load_report {
  std::size_t requests = 0;       // answered and checked
  std::uint64_t bytes = 0;        // payload bytes sent plus result bytes received
  std::uint64_t payload_bytes = 0;  // payload bytes sent (what two servers in a row carry end to end)
  double seconds = 0;
  std::vector<double> latencies;  // seconds per request, sorted
  std::size_t failures = 0;       // wrong replies, error replies, broken connections
  // The first few. An error reply is given by its status and message, also when the server sent it
  // instead of reading the rest of the request (the write then failed: the reply says why).
  std::vector<std::string> failure_messages;

  double gigabytes_per_second() const { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }
  double payload_gigabytes_per_second() const {
    return seconds > 0 ? static_cast<double>(payload_bytes) / seconds / 1e9 : 0;
  }
  double requests_per_second() const { return seconds > 0 ? static_cast<double>(requests) / seconds : 0; }
  double latency_percentile(double p) const;  // seconds; 0 when there are no samples
};

// Throws std::invalid_argument for options that cannot run (no connections, min > max, ...).
load_report run_load(const load_options& options);

}  // namespace ferry::pipeline
