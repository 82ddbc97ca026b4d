// The load generator against a server that refuses its request and closes without reading the rest:
// the generator's write then fails (EPIPE or ECONNRESET), and what it reports is the server's answer,
// its status and message, not the write's error. Payloads are many MiB, more than the sockets' buffers
// on both sides hold, so that the write really fails before it is done.
#include <boost/test/unit_test.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/pipeline_load/load_generator.hpp"
#include "examples/pipeline_server/server.hpp"
#include "tests/pipeline/client.hpp"
#include "tests/pipeline/server_fixture.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using namespace ferry::testing;
using pipeline::operation;

namespace {

constexpr std::size_t refused_bytes = std::size_t{16} << 20;

// One request of `bytes` bytes on each of `connections` connections, nothing but transforms.
pipeline::load_options one_request_each(const boost::asio::ip::tcp::endpoint& server, std::size_t connections,
                                        std::size_t bytes) {
  pipeline::load_options o;
  o.server = server;
  o.connections = connections;
  o.requests_per_connection = 1;
  o.min_bytes = bytes;
  o.max_bytes = bytes;
  o.checksum_every = 0;
  o.threads = 2;
  o.label = "";
  return o;
}

// Every connection failed, each with a message that has all of `parts` and names no write error.
void check_every_connection_reports(const pipeline::load_report& report, std::size_t connections,
                                    const std::vector<std::string>& parts) {
  BOOST_CHECK_EQUAL(report.requests, 0u);
  BOOST_CHECK_EQUAL(report.failures, connections);
  BOOST_CHECK_EQUAL(report.failure_messages.size(), connections);
  for (const std::string& message : report.failure_messages) {
    for (const std::string& part : parts) BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos, message);
    BOOST_CHECK_MESSAGE(message.find("not sent") == std::string::npos, message);
    BOOST_CHECK_MESSAGE(message.find("Broken pipe") == std::string::npos, message);
    BOOST_CHECK_MESSAGE(message.find("reset by peer") == std::string::npos, message);
  }
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(load_generator_against_refusals, server_fixture)

BOOST_AUTO_TEST_CASE(a_payload_over_the_servers_maximum_is_reported_too_large_with_the_servers_message) {
  start();  // a maximum of 1 MiB
  const pipeline::load_report report = pipeline::run_load(one_request_each(srv->endpoint(), 3, refused_bytes));
  check_every_connection_reports(report, 3,
                                 {"request 0 (16777216 bytes): the server answered too_large: payload length "
                                  "16777216 bytes is over the server's maximum of 1048576 bytes"});
  BOOST_CHECK(eventually([&] { return srv->metrics().errors(pipeline::error_kind::too_large) == 3u; }));
}

BOOST_AUTO_TEST_CASE(a_connection_over_the_servers_limit_is_reported_busy_with_the_servers_message) {
  pipeline::server_options options = small_server_options();
  options.max_connections = 1;
  start(options);
  client admitted(srv->endpoint());
  BOOST_REQUIRE(eventually([&] { return srv->metrics().connections_open() == 1; }));
  const pipeline::load_report report = pipeline::run_load(one_request_each(srv->endpoint(), 1, refused_bytes));
  check_every_connection_reports(report, 1,
                                 {"request 0 (16777216 bytes): the server answered busy: ", "maximum of 1 connections"});
  BOOST_CHECK_EQUAL(srv->metrics().connections_refused(), 1u);
}

BOOST_AUTO_TEST_CASE(a_payload_left_unread_past_its_deadline_is_reported_deadline_exceeded) {
  pipeline::server_options options = small_server_options();
  options.max_payload_bytes = refused_bytes;
  options.memory_budget_bytes = 2 * refused_bytes;
  options.large_payload_bytes = 100000;
  options.large_payloads_at_once = 1;
  options.request_deadline = std::chrono::seconds(1);
  start(options, 1);
  // A large payload held on the gated lane keeps the one place for large payloads until the gate
  // opens, so the generator's waits for its turn, its payload unread, until its deadline passes.
  client holder(srv->endpoint());
  const auto held = random_vector<std::uint8_t>(150000, 160);
  holder.send_request(operation::transform, held);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->large_payloads()->inside == 1; }));
  const pipeline::load_report report = pipeline::run_load(one_request_each(srv->endpoint(), 1, refused_bytes));
  check_every_connection_reports(report, 1, {"request 0 (16777216 bytes): the server answered deadline_exceeded: "});
  BOOST_CHECK_LT(srv->metrics().received_bytes(), refused_bytes);  // the answer came before the payload
  open_gates();
  holder.close();
}

BOOST_AUTO_TEST_SUITE_END()

// Without a reply to read, the write's own error is what there is to report.
BOOST_AUTO_TEST_CASE(a_peer_that_closes_without_answering_is_reported_by_the_write_error) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::thread closer([&] {
    boost::asio::ip::tcp::socket accepted(io);
    acceptor.accept(accepted);
    boost::system::error_code ignored;
    accepted.close(ignored);  // the request unread: the generator's write meets a reset
  });
  const pipeline::load_report report = pipeline::run_load(one_request_each(acceptor.local_endpoint(), 1, refused_bytes));
  closer.join();
  BOOST_CHECK_EQUAL(report.requests, 0u);
  BOOST_CHECK_EQUAL(report.failures, 1u);
  BOOST_REQUIRE_EQUAL(report.failure_messages.size(), 1u);
  BOOST_CHECK_MESSAGE(report.failure_messages[0].find("request 0 not sent: ") != std::string::npos,
                      report.failure_messages[0]);
}
