// Two pipeline servers in a row on loopback (stage to stage): the first (A) transforms a forward's
// payload and hands it over ferry::remote to the next stage (B, srv of the fixture), which checksums it;
// every reply's checksum is checked against the host's transform. Forwards of every size, many at once
// over few slots, a server without a next stage, the next stage stopping mid-load, and options that
// cannot work. The windows are host memory on the sim backend and device memory on cuda.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/pipeline_load/load_generator.hpp"
#include "examples/pipeline_server/kernels/host_transform.hpp"
#include "tests/pipeline/server_fixture.hpp"
#include "tests/support/expect_error.hpp"

using namespace ferry::testing;
using ferry::pipeline::operation;
using ferry::pipeline::status;

namespace {

constexpr std::size_t max_payload = (std::size_t{2} << 20) - 5;  // odd, and a class over 1 MiB

// Both stages: payloads over 1 MiB, and the window memory the backend can put into (device on cuda).
ferry::pipeline::server_options stage_options() {
  ferry::pipeline::server_options o = small_server_options();
  o.max_payload_bytes = max_payload;
  o.memory_budget_bytes = std::size_t{16} << 20;
  o.stage_memory = on_sim() ? ferry::remote::memory_kind::host : ferry::remote::memory_kind::device;
  return o;
}

// A payload with no zero byte, so that a slot left as it was (zeroed) cannot pass for it.
std::vector<std::uint8_t> payload_of(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> payload = random_vector<std::uint8_t>(bytes, seed);
  for (std::uint8_t& b : payload) b |= 1;
  return payload;
}

std::uint64_t transformed_checksum(const std::vector<std::uint8_t>& payload) {
  return ferry::pipeline::kernels::transformed_checksum(reinterpret_cast<const std::byte*>(payload.data()),
                                                        payload.size());
}

void check_forwarded(const reply& r, const std::vector<std::uint8_t>& payload) {
  BOOST_REQUIRE_MESSAGE(r.header.status == status::ok, payload.size() << " bytes: status "
                                                                       << ferry::pipeline::to_string(r.header.status)
                                                                       << ": " << r.text());
  BOOST_CHECK_EQUAL(r.header.length, 0u);
  BOOST_CHECK_EQUAL(r.header.checksum, transformed_checksum(payload));
}

// srv (the fixture's) is the next stage, B; `first` is A, whose next stage it is.
struct two_stages : server_fixture {
  void start_both(ferry::pipeline::server_options next = stage_options(), std::size_t gated_next_lanes = 0,
                  std::size_t slots = 4) {
    next.stage_port = 0;
    start(next, gated_next_lanes);
    ferry::pipeline::server_options a = stage_options();
    a.next_stage = "127.0.0.1:" + std::to_string(srv->stage_port());
    a.stage_slots = slots;
    first = std::make_unique<ferry::pipeline::server>(a, [](boost::asio::any_io_executor executor) {
      return std::make_unique<ferry::pipeline::ferry_stage>(std::move(executor), ferry::pipeline::ferry_stage::options{});
    });
  }
  // Nothing held by either once their requests are done.
  void check_nothing_leased() {
    BOOST_CHECK(eventually([&] { return first->memory().leased_bytes == 0 && srv->memory().leased_bytes == 0; }));
    BOOST_CHECK_EQUAL(first->lanes().busy, 0u);
  }
  // A goes before B (the fixture's).
  ~two_stages() {
    open_gates();
    first.reset();
  }
  std::unique_ptr<ferry::pipeline::server> first;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(stage_to_stage, two_stages)

BOOST_AUTO_TEST_CASE(forwards_of_every_size_come_back_with_the_checksum_of_the_transform) {
  start_both();
  BOOST_REQUIRE_NE(srv->stage_port(), 0);
  client c(first->endpoint());
  std::uint64_t seed = 1;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{15}, std::size_t{16},
                            std::size_t{17}, std::size_t{4095}, std::size_t{4096}, std::size_t{65537},
                            std::size_t{1} << 20, (std::size_t{1} << 20) + 13, max_payload}) {
    const auto payload = payload_of(bytes, ++seed);
    c.send_request(operation::forward, payload);
    check_forwarded(c.read_reply(), payload);
  }
  // An empty payload is summed to 0 by the next stage too.
  c.send_request(operation::forward, {});
  check_forwarded(c.read_reply(), {});
  // transform and checksum still run on the first stage, on the same connection.
  const auto payload = payload_of(300001, 99);
  c.send_request(operation::transform, payload);
  check_reply(c.read_reply(), operation::transform, payload);
  c.send_request(operation::checksum, payload);
  check_reply(c.read_reply(), operation::checksum, payload);
  check_nothing_leased();
}

BOOST_AUTO_TEST_CASE(many_forwards_at_once_wait_for_the_slots_and_reuse_them) {
  start_both(stage_options(), 0, 2);  // 2 slots for 8 connections
  ferry::pipeline::load_options load;
  load.server = first->endpoint();
  load.connections = 8;
  load.requests_per_connection = 12;
  load.min_bytes = 1;
  load.max_bytes = max_payload;
  load.checksum_every = 4;  // some checksums on the first stage in between
  load.forward = true;
  load.threads = 2;
  load.label = "";
  const ferry::pipeline::load_report report = ferry::pipeline::run_load(load);
  for (const std::string& message : report.failure_messages) BOOST_TEST_MESSAGE(message);
  BOOST_CHECK_EQUAL(report.failures, 0u);
  BOOST_CHECK_EQUAL(report.requests, 96u);
  // Counted once each reply is written, which the client may see first.
  BOOST_CHECK(eventually([&] { return first->metrics().requests(status::ok) == 96u; }));
  check_nothing_leased();
}

BOOST_AUTO_TEST_CASE(a_server_without_a_next_stage_answers_no_next_stage_and_keeps_the_connection) {
  start_both();
  client c(srv->endpoint());  // B has a stage port but no next stage
  const auto payload = payload_of(5000, 3);
  c.send_request(operation::forward, payload);
  const reply refused = c.read_reply();
  BOOST_CHECK(refused.header.status == status::no_next_stage);
  BOOST_CHECK_EQUAL(refused.header.checksum, 0u);
  BOOST_CHECK_MESSAGE(refused.text().find("--next-stage") != std::string::npos, refused.text());
  c.send_request(operation::transform, payload);
  check_reply(c.read_reply(), operation::transform, payload);
  BOOST_CHECK(eventually([&] {
    return srv->metrics_text().find("operation=\"forward\",status=\"no_next_stage\"} 1") != std::string::npos;
  }));
  check_nothing_leased();
}

BOOST_AUTO_TEST_CASE(when_the_next_stage_stops_pending_and_later_forwards_fail_at_once) {
  ferry::pipeline::server_options next = stage_options();
  next.gpu_lanes = 1;
  start_both(next, 1);  // B's one lane is held: the forwards wait for its answers
  std::vector<std::unique_ptr<client>> clients;
  std::vector<std::vector<std::uint8_t>> payloads;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<client>(first->endpoint()));
    payloads.push_back(payload_of(70000 + i, 10 + i));
    clients.back()->send_request(operation::forward, payloads.back());
  }
  // The first has reached B's GPU; the others wait there for its lane or for its memory.
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && first->lanes().busy == 0; }));
  const auto stopped = std::chrono::steady_clock::now();
  srv->shutdown();  // B: no client connections, so its stage links close at once
  for (auto& c : clients) {
    BOOST_REQUIRE(c->readable_within(std::chrono::milliseconds(1000)));
    const reply failed = c->read_reply();
    BOOST_CHECK_MESSAGE(failed.header.status == status::next_stage_failed,
                        ferry::pipeline::to_string(failed.header.status) << ": " << failed.text());
    BOOST_CHECK_MESSAGE(failed.text().find("next stage") != std::string::npos, failed.text());
  }
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(1));
  // Later forwards fail at once; the connection stays, and transform still works.
  client& c = *clients.front();
  c.send_request(operation::forward, payloads.front());
  BOOST_REQUIRE(c.readable_within(std::chrono::milliseconds(1000)));
  BOOST_CHECK(c.read_reply().header.status == status::next_stage_failed);
  c.send_request(operation::transform, payloads.front());
  check_reply(c.read_reply(), operation::transform, payloads.front());
  BOOST_CHECK(eventually([&] { return first->metrics().errors(ferry::pipeline::error_kind::next_stage_failed) == 4u; }));
  open_gates();
  srv->wait();
  check_nothing_leased();
}

BOOST_AUTO_TEST_CASE(stage_options_that_cannot_work_are_refused_naming_the_option_and_value) {
  auto start_with = [](ferry::pipeline::server_options o) {
    ferry::pipeline::server s(o, [](boost::asio::any_io_executor executor) {
      return std::make_unique<ferry::pipeline::ferry_stage>(std::move(executor), ferry::pipeline::ferry_stage::options{});
    });
  };
  ferry::pipeline::server_options malformed = stage_options();
  malformed.next_stage = "localhost";
  expect_error<std::invalid_argument>([&] { start_with(malformed); }, {"--next-stage", "\"localhost\"", "HOST:PORT"});
  malformed.next_stage = "127.0.0.1:70000";
  expect_error<std::invalid_argument>([&] { start_with(malformed); }, {"--next-stage", "70000", "65535"});
  ferry::pipeline::server_options no_slots = stage_options();
  no_slots.stage_slots = 0;
  expect_error<std::invalid_argument>([&] { start_with(no_slots); }, {"stage_slots", "--stage-slots", " 0 "});
  // Nothing listens on port 1 of loopback: refused at once, or within the connect limit.
  ferry::pipeline::server_options unreachable = stage_options();
  unreachable.next_stage = "127.0.0.1:1";
  unreachable.next_stage_connect_limit = std::chrono::milliseconds(2000);
  expect_error<std::runtime_error>([&] { start_with(unreachable); }, {"--next-stage 127.0.0.1:1", "cannot be reached"});
  expect_error<std::invalid_argument>(
      [] { (void)ferry::pipeline::parse_memory_kind("disk", "--stage-memory"); }, {"--stage-memory", "\"disk\""});
  if (on_sim()) {
    ferry::pipeline::server_options device_window = stage_options();
    device_window.stage_port = 0;
    device_window.stage_memory = ferry::remote::memory_kind::device;
    expect_error<std::invalid_argument>([&] { start_with(device_window); }, {"--stage-memory", "device", "sim"});
  }
}

BOOST_AUTO_TEST_SUITE_END()
