// The pipeline server (examples/pipeline_server) on an ephemeral loopback port: driven by the load
// generator with every reply checked, each kind of bad input answered and the connection closed while
// the server carries on, the per-request deadline, back-pressure, the metrics endpoint, and a graceful
// shutdown under load. After each case the server is gone and (on sim) nothing it held is left.
#include "examples/pipeline_server/server.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <string>
#include <thread>

#include "bench/pipeline_load/load_generator.hpp"
#include "tests/pipeline/client.hpp"
#include "tests/pipeline/server_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using namespace ferry::testing;
using pipeline::operation;
using pipeline::status;

namespace {

pipeline::load_options small_load(const pipeline::server& srv) {
  pipeline::load_options o;
  o.server = srv.endpoint();
  o.connections = 4;
  o.requests_per_connection = 12;
  o.min_bytes = 1;
  o.max_bytes = 256 << 10;
  o.checksum_every = 3;
  o.threads = 2;
  o.label = "";
  return o;
}

// A server that has seen bad input still answers others correctly, and holds no memory for the failed one.
void check_still_serving(server_fixture& f) {
  client other(f.srv->endpoint());
  const auto payload = random_vector<std::uint8_t>(70001, 99);
  other.send_request(operation::transform, payload);
  check_reply(other.read_reply(), operation::transform, payload);
  other.close();
  BOOST_CHECK(eventually([&] { return f.srv->metrics().connections_open() == 0; }));
  BOOST_CHECK_EQUAL(f.srv->memory().leased_bytes, 0u);
}

void check_error_reply(client& c, status expected, std::initializer_list<std::string_view> parts) {
  const reply r = c.read_reply();
  BOOST_CHECK_EQUAL(pipeline::to_string(r.header.status), pipeline::to_string(expected));
  BOOST_CHECK_EQUAL(r.header.checksum, 0u);
  for (std::string_view part : parts) {
    BOOST_CHECK_MESSAGE(r.text().find(part) != std::string::npos, "message \"" << r.text() << "\" lacks \"" << part << "\"");
  }
  BOOST_CHECK_MESSAGE(c.closed_by_server(), "the server kept the connection open after " << pipeline::to_string(expected));
}

// ferry's GPU step, then one wrong byte in every reply (or a wrong checksum for the checksum operation):
// what the load generator must catch.
class corrupting_stage final : public pipeline::gpu_stage {
 public:
  explicit corrupting_stage(boost::asio::any_io_executor executor)
      : inner_(std::move(executor), pipeline::ferry_stage::options{}) {}
  std::unique_ptr<pipeline::gpu_lane> open_lane() override { return std::make_unique<lane>(inner_.open_lane()); }
  context_ref context() const noexcept override { return inner_.context(); }
  std::shared_ptr<void> adopt_host_buffer(std::span<std::uint8_t> m) override { return inner_.adopt_host_buffer(m); }
  void forget_host_memory(std::span<std::uint8_t> m) override { inner_.forget_host_memory(m); }
  std::optional<ferry::plan_counts> plan_counts() const override { return inner_.plan_counts(); }
  std::string name() const override { return "corrupting"; }

 private:
  struct lane final : pipeline::gpu_lane {
    explicit lane(std::unique_ptr<pipeline::gpu_lane> inner) : inner(std::move(inner)) {}
    boost::asio::awaitable<pipeline::stage_outcome> run(operation op, pipeline::staging_pair& pair, std::size_t bytes,
                                                        pipeline::deadline& limit) override {
      pipeline::stage_outcome outcome = co_await inner->run(op, pair, bytes, limit);
      if (op == operation::transform && bytes > 0) {
        pair.host[bytes / 2] ^= 0x10;
      } else {
        outcome.checksum += 1;
      }
      co_return outcome;
    }
    boost::asio::awaitable<pipeline::stage_outcome> transform_for_next_stage(pipeline::staging_pair& pair,
                                                                             std::size_t bytes, bool result_to_host,
                                                                             pipeline::deadline& limit) override {
      return inner->transform_for_next_stage(pair, bytes, result_to_host, limit);
    }
    boost::asio::awaitable<pipeline::stage_outcome> checksum_slot(const pipeline::window_slot& slot, std::size_t bytes,
                                                                  pipeline::staging_pair* scratch,
                                                                  pipeline::deadline& limit) override {
      return inner->checksum_slot(slot, bytes, scratch, limit);
    }
    std::unique_ptr<pipeline::gpu_lane> inner;
  };
  pipeline::ferry_stage inner_;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipeline_server, server_fixture)

BOOST_AUTO_TEST_CASE(load_generator_reports_a_wrong_byte_or_checksum) {
  srv = std::make_unique<pipeline::server>(small_server_options(), [](boost::asio::any_io_executor executor) {
    return std::make_unique<corrupting_stage>(std::move(executor));
  });
  pipeline::load_options load = small_load(*srv);
  load.checksum_every = 2;  // connections alternate: a transform first, then a checksum
  const pipeline::load_report report = pipeline::run_load(load);
  BOOST_CHECK_EQUAL(report.requests, 0u);
  BOOST_CHECK_EQUAL(report.failures, load.connections);  // each connection stops at its first wrong reply
  for (const std::string& message : report.failure_messages) {
    BOOST_CHECK_MESSAGE(message.find("differs from the transform of the payload") != std::string::npos, message);
  }
  load.checksum_every = 1;  // checksums only
  const pipeline::load_report checksums = pipeline::run_load(load);
  BOOST_CHECK_EQUAL(checksums.failures, load.connections);
  for (const std::string& message : checksums.failure_messages) {
    BOOST_CHECK_MESSAGE(message.find("checksum") != std::string::npos, message);
  }
}

BOOST_AUTO_TEST_CASE(load_generator_gets_every_reply_right_on_many_connections) {
  start();
  const pipeline::load_report report = pipeline::run_load(small_load(*srv));
  for (const std::string& message : report.failure_messages) BOOST_ERROR(message);
  BOOST_CHECK_EQUAL(report.failures, 0u);
  BOOST_CHECK_EQUAL(report.requests, 4u * 12u);
  // The server counts a request once its reply is written, which the client may have read already.
  BOOST_CHECK(eventually([&] { return srv->metrics().requests(status::ok) == 4u * 12u; }));
  BOOST_CHECK(eventually([&] { return srv->metrics().connections_open() == 0; }));
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, 0u);
}

BOOST_AUTO_TEST_CASE(large_buffers_are_page_locked_once_and_moved_in_one_dma) {
  start(small_server_options(), 0, 64 << 10);  // classes of 64 KiB and up are registered
  client c(srv->endpoint());
  for (std::uint64_t i = 0; i < 4; ++i) {
    const auto payload = random_vector<std::uint8_t>(100000 + i, 30 + i);  // the 128 KiB class, reused
    c.send_request(operation::transform, payload);
    check_reply(c.read_reply(), operation::transform, payload);
  }
  // The 4 KiB class: pageable; the poke and the peek staged (through the engine's small slots).
  const auto small = random_vector<std::uint8_t>(3000, 40);
  c.send_request(operation::transform, small);
  check_reply(c.read_reply(), operation::transform, small);
  const ferry::plan_counts plans = *srv->stage().plan_counts();
  BOOST_CHECK_EQUAL(plans.pinned, 8u);  // 4 pokes and 4 peeks
  BOOST_CHECK_EQUAL(plans.staged, 2u);
  BOOST_CHECK_EQUAL(plans.driver_staged, 0u);
  BOOST_CHECK_EQUAL(plans.registered, 0u);
}

BOOST_AUTO_TEST_CASE(requests_on_one_connection_are_answered_in_order) {
  start();
  client c(srv->endpoint());
  std::vector<std::vector<std::uint8_t>> payloads;
  for (std::uint64_t i = 0; i < 6; ++i) payloads.push_back(random_vector<std::uint8_t>(1000 + 40000 * i + i, 10 + i));
  // All sent before any reply is read: the server reads the next request while answering the last.
  for (const auto& payload : payloads) c.send_request(operation::transform, payload);
  for (const auto& payload : payloads) check_reply(c.read_reply(), operation::transform, payload);
  const auto empty = std::vector<std::uint8_t>{};
  c.send_request(operation::checksum, empty);
  check_reply(c.read_reply(), operation::checksum, empty);
}

BOOST_AUTO_TEST_CASE(bad_magic_gets_an_error_reply_and_the_connection_closed) {
  start();
  client c(srv->endpoint());
  c.send_header(1, 16, 0x50545448);  // "HTTP"
  check_error_reply(c, status::bad_magic, {"magic 0x50545448", "expected 0x31515246"});
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::bad_magic), 1u);
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(unknown_operation_gets_an_error_reply_and_the_connection_closed) {
  start();
  client c(srv->endpoint());
  c.send_header(9, 64);
  check_error_reply(c, status::unknown_operation, {"unknown operation 9", "1 transform, 2 checksum"});
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::unknown_operation), 1u);
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(length_over_the_maximum_is_refused_before_its_payload_is_read) {
  start();
  client c(srv->endpoint());
  c.send_header(static_cast<std::uint32_t>(operation::transform), (1 << 20) + 1);
  check_error_reply(c, status::too_large, {"payload length 1048577 bytes", "maximum of 1048576 bytes"});
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::too_large), 1u);
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(truncated_header_gets_an_error_reply) {
  start();
  client c(srv->endpoint());
  const auto head = pipeline::encode(pipeline::request_header{pipeline::request_magic, 1, 100});
  c.send_raw(head.data(), 7);
  c.finish_sending();
  check_error_reply(c, status::truncated, {"request header truncated", "after 7 of 16 bytes"});
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::truncated), 1u);
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(truncated_payload_gets_an_error_reply_and_its_memory_back) {
  start();
  client c(srv->endpoint());
  const auto payload = random_vector<std::uint8_t>(10, 3);
  c.send_header(static_cast<std::uint32_t>(operation::transform), 100000);
  c.send_raw(payload.data(), payload.size());
  c.finish_sending();
  check_error_reply(c, status::truncated, {"payload truncated", "after 10 of 100000 bytes"});
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(client_gone_mid_payload_leaves_nothing_held) {
  start();
  {
    client c(srv->endpoint());
    const auto part = random_vector<std::uint8_t>(100000, 4);  // past the prefix read before the lease
    c.send_header(static_cast<std::uint32_t>(operation::transform), 900000);
    c.send_raw(part.data(), part.size());
    BOOST_REQUIRE(eventually([&] { return srv->memory().leased_bytes > 0; }));  // the payload is being read
    c.close();
  }
  BOOST_CHECK(eventually([&] { return srv->memory().leased_bytes == 0 && srv->metrics().connections_open() == 0; }));
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(client_gone_mid_reply_leaves_nothing_held) {
  start();
  {
    client c(srv->endpoint(), 4096);
    const auto payload = random_vector<std::uint8_t>(1 << 20, 5);
    c.send_request(operation::transform, payload);
    BOOST_CHECK_GT(c.read_some(100), 0u);  // the reply has begun
    c.close();
  }
  BOOST_CHECK(eventually([&] { return srv->memory().leased_bytes == 0 && srv->metrics().connections_open() == 0; }));
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(client_that_never_reads_replies_is_dropped_at_the_write_deadline) {
  pipeline::server_options options = small_server_options();
  options.write_deadline = std::chrono::milliseconds(500);
  start(options);
  std::atomic<bool> sending_failed{false};
  std::thread writer([&] {
    client c(srv->endpoint(), 4096);
    const auto payload = random_vector<std::uint8_t>(1 << 20, 6);
    try {
      for (int i = 0; i < 64; ++i) c.send_request(operation::transform, payload);  // and never reads
    } catch (const boost::system::system_error&) {
      sending_failed = true;  // the server dropped the connection
    }
  });
  writer.join();
  BOOST_CHECK(sending_failed);
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::write_timeout), 1u);
  BOOST_CHECK(eventually([&] { return srv->memory().leased_bytes == 0 && srv->metrics().connections_open() == 0; }));
  check_still_serving(*this);
}

BOOST_AUTO_TEST_CASE(request_past_its_deadline_is_cancelled_and_the_connection_goes_on) {
  pipeline::server_options options = small_server_options();
  // Long enough for the next request on the connection to meet it however slowly the machine runs.
  options.request_deadline = std::chrono::seconds(1);
  start(options, 1);
  client c(srv->endpoint());
  const auto late = random_vector<std::uint8_t>(300000, 7);
  c.send_request(operation::transform, late);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1; }));
  // The GPU step is held back past the deadline; ferry's ops complete only once the GPU is done.
  std::this_thread::sleep_for(options.request_deadline + std::chrono::milliseconds(300));
  open_gates();
  const reply r = c.read_reply();
  BOOST_CHECK_EQUAL(pipeline::to_string(r.header.status), pipeline::to_string(status::deadline_exceeded));
  BOOST_CHECK_MESSAGE(r.text().find("deadline passed") != std::string::npos, r.text());
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::deadline_exceeded), 1u);
  const auto next = random_vector<std::uint8_t>(12345, 8);
  c.send_request(operation::transform, next);
  check_reply(c.read_reply(), operation::transform, next);
}

BOOST_AUTO_TEST_CASE(full_budget_stops_reading_until_memory_comes_back) {
  pipeline::server_options options = small_server_options();
  options.memory_budget_bytes = options.max_payload_bytes;  // one full-size request at a time
  start(options, 1);
  client first(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(options.max_payload_bytes, 11);
  first.send_request(operation::transform, a);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->memory().leased_bytes == options.max_payload_bytes; }));
  client second(srv->endpoint());
  const auto b = random_vector<std::uint8_t>(options.max_payload_bytes - 3, 12);
  std::thread sender([&] { second.send_request(operation::transform, b); });
  // The second request waits for memory: its payload is not read, nothing more is allocated.
  BOOST_CHECK(eventually([&] { return srv->memory().waiting == 1; }));
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, options.max_payload_bytes);
  BOOST_CHECK(srv->metrics_text().find("pipeline_staging_waiting{stage=\"ferry\"} 1") != std::string::npos);
  open_gates();
  check_reply(first.read_reply(), operation::transform, a);
  sender.join();
  check_reply(second.read_reply(), operation::transform, b);
  BOOST_CHECK_LE(srv->memory().leased_bytes + srv->memory().idle_bytes, options.memory_budget_bytes);
}

BOOST_AUTO_TEST_CASE(metrics_endpoint_serves_prometheus_text) {
  start();
  client c(srv->endpoint());
  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto payload = random_vector<std::uint8_t>(5000 * (i + 1), 20 + i);
    c.send_request(operation::transform, payload);
    check_reply(c.read_reply(), operation::transform, payload);
  }
  BOOST_REQUIRE(eventually([&] { return srv->metrics().requests(status::ok) == 3; }));
  const std::string text = http_get(srv->metrics_endpoint(), "/metrics");
  for (const char* line : {"HTTP/1.0 200 OK", "text/plain; version=0.0.4",
                           "pipeline_requests_total{stage=\"ferry\",operation=\"transform\",status=\"ok\"} 3",
                           "pipeline_request_seconds_count{stage=\"ferry\"} 3",
                           "pipeline_received_bytes_total{stage=\"ferry\"} 30048",  // 3 headers + 30000 payload bytes
                           "pipeline_sent_bytes_total{stage=\"ferry\"} 30072",      // 3 headers + 30000 result bytes
                           "pipeline_errors_total{stage=\"ferry\",kind=\"write_timeout\"} 0",
                           "pipeline_staging_budget_bytes{stage=\"ferry\"} 4194304",
                           "pipeline_transfer_plans_total{stage=\"ferry\",plan=\"staged\"} 6",
                           "pipeline_transfer_plans_total{stage=\"ferry\",plan=\"driver_staged\"} 0"}) {
    BOOST_CHECK_MESSAGE(text.find(line) != std::string::npos, "the scrape lacks \"" << line << "\":\n" << text);
  }
  BOOST_CHECK(http_get(srv->metrics_endpoint(), "/other").find("HTTP/1.0 404 Not Found") == 0);
  BOOST_CHECK(http_get(srv->metrics_endpoint(), "/metrics?name=x").find("HTTP/1.0 200 OK") == 0);
}

BOOST_AUTO_TEST_CASE(metrics_endpoint_answers_another_method_with_405_and_the_allowed_one) {
  start();
  const std::string text = http_request(srv->metrics_endpoint(), "POST", "/metrics");
  BOOST_CHECK_MESSAGE(text.find("HTTP/1.0 405 Method Not Allowed") == 0, text);
  BOOST_CHECK_MESSAGE(text.find("Allow: GET") != std::string::npos, text);
  BOOST_CHECK(http_request(srv->metrics_endpoint(), "DELETE", "/other").find("HTTP/1.0 404 Not Found") == 0);
}

BOOST_AUTO_TEST_CASE(metrics_scrape_without_a_whole_header_is_closed_at_the_header_deadline) {
  pipeline::server_options options = small_server_options();
  options.header_deadline = std::chrono::milliseconds(200);
  start(options);
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket scraper(io);
  const auto sent = std::chrono::steady_clock::now();  // before the connection: the server's clock starts at it
  scraper.connect(srv->metrics_endpoint());
  boost::asio::write(scraper, boost::asio::buffer(std::string("GET /metrics HTTP/1.0\r\n")));  // never ends
  char byte = 0;
  boost::system::error_code closed;
  const std::size_t read = scraper.read_some(boost::asio::buffer(&byte, 1), closed);
  const auto waited = std::chrono::steady_clock::now() - sent;
  BOOST_CHECK_EQUAL(read, 0u);
  BOOST_CHECK(closed == boost::asio::error::eof || closed == boost::asio::error::connection_reset);
  BOOST_CHECK(waited >= std::chrono::milliseconds(150));
  BOOST_CHECK(waited < std::chrono::seconds(5));
}

BOOST_AUTO_TEST_CASE(shutdown_under_load_finishes_requests_in_flight_and_stops) {
  start();
  pipeline::load_options load = small_load(*srv);
  load.requests_per_connection = 0;
  load.duration = std::chrono::seconds(30);
  pipeline::load_report report;
  std::thread driver([&] { report = pipeline::run_load(load); });
  BOOST_REQUIRE(eventually([&] { return srv->metrics().requests(status::ok) >= 20; }));
  const auto asked = std::chrono::steady_clock::now();
  srv->shutdown();
  srv->wait();
  const auto took = std::chrono::steady_clock::now() - asked;
  driver.join();
  BOOST_CHECK_LT(std::chrono::duration<double>(took).count(), 5.0);  // well within the grace period
  BOOST_CHECK_GE(report.requests, 20u);
  // Every reply that came was right; what failed is only the connections the shutdown closed.
  for (const std::string& message : report.failure_messages) {
    BOOST_CHECK_MESSAGE(message.find("no reply") != std::string::npos || message.find("not sent") != std::string::npos ||
                            message.find("shutting_down") != std::string::npos,
                        message);
  }
  BOOST_CHECK_EQUAL(srv->metrics().requests(status::ok), report.requests);
  BOOST_CHECK_EQUAL(srv->metrics().connections_open(), 0);
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, 0u);
  BOOST_CHECK_THROW(client late(srv->endpoint()), boost::system::system_error);  // no longer accepting
}

// A pipelining client at shutdown: the reply in flight arrives whole, the request sent behind it is
// answered shutting_down, and the connection ends with the end of the stream, not a reset (which would
// drop the part of the reply the client had not read yet).
BOOST_AUTO_TEST_CASE(shutdown_delivers_the_reply_in_flight_whole_and_answers_a_pipelined_request) {
  for (std::uint64_t trial = 0; trial < 3; ++trial) {
    pipeline::server_options options = small_server_options();
    options.max_payload_bytes = std::size_t{4} << 20;
    options.memory_budget_bytes = std::size_t{16} << 20;
    start(options, 1);
    client c(srv->endpoint(), 4096);
    const auto first = random_vector<std::uint8_t>(options.max_payload_bytes, 30 + trial);
    const auto second = random_vector<std::uint8_t>(5000, 40 + trial);
    c.send_request(operation::transform, first);
    BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->lanes().busy == 1; }));
    c.send_request(operation::transform, second);  // behind the first, before its reply
    srv->shutdown();
    open_gates();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server writes and ends meanwhile
    check_reply(c.read_reply(), operation::transform, first);
    const reply queued = c.read_reply();
    BOOST_CHECK_EQUAL(pipeline::to_string(queued.header.status), pipeline::to_string(status::shutting_down));
    std::uint8_t byte;
    boost::system::error_code end;
    BOOST_CHECK_EQUAL(c.read_some_into(&byte, 1, end), 0u);
    BOOST_CHECK_MESSAGE(end == boost::asio::error::eof, "the connection ended with " << end.message());
    srv->wait();
    srv.reset();
    std::lock_guard lock(gates_mutex);
    gates.clear();  // the next trial's server gates its first lane again
  }
}

// requests_total{status="ok"} counts replies delivered: a client that leaves before its reply is in is
// counted disconnected, not ok.
BOOST_AUTO_TEST_CASE(a_reply_the_client_never_received_is_not_counted_ok) {
  pipeline::server_options options = small_server_options();
  options.max_payload_bytes = std::size_t{16} << 20;  // more than the sockets' buffers hold
  options.memory_budget_bytes = std::size_t{64} << 20;
  start(options);
  {
    client c(srv->endpoint(), 4096);
    const auto payload = random_vector<std::uint8_t>(options.max_payload_bytes, 50);
    c.send_request(operation::transform, payload);
    BOOST_CHECK_GT(c.read_some(100), 0u);  // the reply has begun
    c.close();
  }
  BOOST_CHECK(eventually([&] { return srv->metrics().connections_open() == 0; }));
  BOOST_CHECK_EQUAL(srv->metrics().requests(status::ok), 0u);
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::disconnected), 1u);
  BOOST_CHECK(srv->metrics_text().find("pipeline_requests_total{stage=\"ferry\",operation=\"transform\",status=\"ok\"} 0") !=
              std::string::npos);
}

BOOST_AUTO_TEST_CASE(options_that_cannot_work_are_rejected_by_name) {
  pipeline::server_options options = small_server_options();
  options.memory_budget_bytes = options.max_payload_bytes / 2;
  expect_error<std::invalid_argument>([&] { start(options); },
                                      {"memory_budget_bytes 524288", "max_payload_bytes 1048576"});
  options = small_server_options();
  options.address = "not-an-address";
  expect_error<std::invalid_argument>([&] { start(options); }, {"address \"not-an-address\""});
  options = small_server_options();
  options.header_deadline = std::chrono::milliseconds(0);
  expect_error<std::invalid_argument>([&] { start(options); }, {"header_deadline 0 ms"});
  options = small_server_options();
  options.max_connections = 0;
  expect_error<std::invalid_argument>([&] { start(options); }, {"max_connections is 0"});
  options = small_server_options();
  options.gpu_lanes = 0;
  expect_error<std::invalid_argument>([&] { start(options); }, {"gpu_lanes is 0"});
  for (std::size_t prefix : {std::size_t{0}, (std::size_t{16} << 20) + 1}) {
    options = small_server_options();
    options.payload_prefix_bytes = prefix;
    expect_error<std::invalid_argument>([&] { start(options); }, {"payload_prefix_bytes " + std::to_string(prefix)});
  }
  options = small_server_options();
  options.large_payload_bytes = 0;
  options.large_payloads_at_once = 3;
  expect_error<std::invalid_argument>([&] { start(options); },
                                      {"large_payload_bytes is 0", "large_payloads_at_once 3"});
}

BOOST_AUTO_TEST_SUITE_END()
