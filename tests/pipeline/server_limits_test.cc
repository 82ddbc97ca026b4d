// The pipeline server against clients that would hold it: silent or trickling headers (the header
// deadline), more connections than it serves (the connection limit), headers announcing payloads that
// never come (no lease before the payload's first bytes), and many connections on few GPU lanes. In each
// case well-behaved clients meanwhile get correct replies, and once the server is gone (on sim) nothing
// it held is left.
#include <boost/test/unit_test.hpp>

#include <chrono>
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
using pipeline::status;
using std::chrono::milliseconds;

namespace {

// How long a test waits for what must happen: far beyond any deadline here, for a slow sanitized run.
constexpr milliseconds patience = std::chrono::seconds(20);

// A reply, or a failed check when none comes within the patience (instead of blocking for ever).
reply reply_within_patience(client& c) {
  BOOST_REQUIRE_MESSAGE(c.readable_within(patience), "no reply within " << patience.count() << " ms");
  return c.read_reply();
}

// One transform on a connection of its own, every byte of the reply checked.
void check_served(const pipeline::server& srv, std::size_t bytes, std::uint64_t seed) {
  client c(srv.endpoint());
  const auto payload = random_vector<std::uint8_t>(bytes, seed);
  c.send_request(operation::transform, payload);
  check_reply(reply_within_patience(c), operation::transform, payload);
}

void check_nothing_held(server_fixture& f) {
  BOOST_CHECK(eventually([&] { return f.srv->metrics().connections_open() == 0; }));
  BOOST_CHECK_EQUAL(f.srv->memory().leased_bytes, 0u);
  BOOST_CHECK_EQUAL(f.srv->lanes().busy, 0u);
}

std::vector<std::byte> header_bytes(operation op, std::uint64_t length) {
  const auto head = pipeline::encode(pipeline::request_header{pipeline::request_magic, static_cast<std::uint32_t>(op), length});
  return {head.begin(), head.end()};
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipeline_server_limits, server_fixture)

BOOST_AUTO_TEST_CASE(silent_clients_are_closed_at_the_header_deadline_while_others_are_served) {
  pipeline::server_options options = small_server_options();
  options.header_deadline = milliseconds(400);
  start(options);
  std::vector<std::unique_ptr<client>> silents;
  const auto head = header_bytes(operation::transform, 1000);
  for (std::size_t sent : {0u, 1u, 7u, 15u, 15u}) {  // nothing, or part of a header, then silence
    silents.push_back(std::make_unique<client>(srv->endpoint()));
    silents.back()->send_raw(head.data(), sent);
  }
  {  // a whole request answered, then silence: the deadline counts from the reply
    auto c = std::make_unique<client>(srv->endpoint());
    const auto payload = random_vector<std::uint8_t>(3000, 50);
    c->send_request(operation::transform, payload);
    check_reply(reply_within_patience(*c), operation::transform, payload);
    silents.push_back(std::move(c));
  }
  // Meanwhile others are served, each within its request deadline.
  for (std::uint64_t i = 0; i < 4; ++i) check_served(*srv, 50000 + 777 * i, 60 + i);

  for (auto& s : silents) {
    // Closed without a reply: the first read finds the end of the stream.
    BOOST_CHECK_MESSAGE(s->readable_within(patience) && s->closed_by_server(),
                        "a silent connection was not closed, or was answered");
  }
  BOOST_CHECK(eventually([&] { return srv->metrics().errors(pipeline::error_kind::header_timeout) == silents.size(); }));
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::truncated), 0u);
  BOOST_CHECK(srv->metrics_text().find("pipeline_errors_total{stage=\"ferry\",kind=\"header_timeout\"} 6") !=
              std::string::npos);
  check_nothing_held(*this);
  check_served(*srv, 1 << 20, 70);
}

BOOST_AUTO_TEST_CASE(connections_over_the_limit_are_refused_busy_and_counted) {
  pipeline::server_options options = small_server_options();
  options.max_connections = 3;
  start(options);
  std::vector<std::unique_ptr<client>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<client>(srv->endpoint()));
  BOOST_REQUIRE(eventually([&] { return srv->metrics().connections_open() == 3; }));
  for (int i = 0; i < 4; ++i) {
    client over(srv->endpoint());
    const reply r = reply_within_patience(over);
    BOOST_CHECK_EQUAL(pipeline::to_string(r.header.status), pipeline::to_string(status::busy));
    BOOST_CHECK_EQUAL(r.header.checksum, 0u);
    BOOST_CHECK_MESSAGE(r.text().find("maximum of 3 connections") != std::string::npos, r.text());
    BOOST_CHECK(over.readable_within(patience) && over.closed_by_server());
  }
  BOOST_CHECK_EQUAL(srv->metrics().connections_refused(), 4u);
  BOOST_CHECK_EQUAL(srv->metrics().connections_open(), 3);
  BOOST_CHECK(srv->metrics_text().find("pipeline_connections_refused_total{stage=\"ferry\"} 4") != std::string::npos);
  BOOST_CHECK(srv->metrics_text().find("pipeline_connections_total{stage=\"ferry\"} 3") != std::string::npos);

  // The admitted connections are served as usual.
  const auto payload = random_vector<std::uint8_t>(123457, 80);
  idle[0]->send_request(operation::transform, payload);
  check_reply(reply_within_patience(*idle[0]), operation::transform, payload);
  // Room again once one goes.
  idle[1]->close();
  BOOST_REQUIRE(eventually([&] { return srv->metrics().connections_open() == 2; }));
  check_served(*srv, 200000, 81);
  BOOST_CHECK_EQUAL(srv->metrics().connections_refused(), 4u);
  idle.clear();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(announced_lengths_without_payload_lease_no_memory) {
  pipeline::server_options options = small_server_options();  // 1 MiB maximum, 4 MiB budget
  start(options);
  // Twice what the budget would hold, if an announcement were enough to lease.
  const std::size_t announced = options.max_payload_bytes;
  std::vector<std::unique_ptr<client>> announcers;
  for (int i = 0; i < 8; ++i) {
    announcers.push_back(std::make_unique<client>(srv->endpoint()));
    const auto head = header_bytes(operation::transform, announced);
    announcers.back()->send_raw(head.data(), head.size());
  }
  BOOST_REQUIRE(eventually([&] { return srv->metrics().received_bytes() == 8u * pipeline::request_header_bytes; }));
  std::this_thread::sleep_for(milliseconds(300));  // time to lease, were the server to
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, 0u);
  BOOST_CHECK_EQUAL(srv->memory().waiting, 0u);
  BOOST_CHECK(srv->metrics_text().find("pipeline_staging_bytes{stage=\"ferry\",state=\"leased\"} 0") != std::string::npos);

  // Real requests of the full size go through meanwhile.
  for (std::uint64_t i = 0; i < 3; ++i) check_served(*srv, announced - i, 90 + i);

  // An announcer whose payload comes late, in pieces, is served too: its first bytes wait outside the
  // budget, the rest goes straight to the leased buffer.
  const auto late = random_vector<std::uint8_t>(announced, 95);
  announcers[0]->send_raw(late.data(), 1000);
  std::this_thread::sleep_for(milliseconds(100));
  // (The served requests' leases go back just after their replies are written.)
  BOOST_CHECK(eventually([&] { return srv->memory().leased_bytes == 0; }));
  announcers[0]->send_raw(late.data() + 1000, late.size() - 1000);
  check_reply(reply_within_patience(*announcers[0]), operation::transform, late);

  announcers.clear();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(payloads_around_the_prefix_size_arrive_whole) {
  pipeline::server_options options = small_server_options();
  options.payload_prefix_bytes = 4096;
  start(options);
  client c(srv->endpoint());
  std::vector<std::vector<std::uint8_t>> payloads;
  for (std::size_t bytes : {0u, 1u, 4095u, 4096u, 4097u, 8192u, 300001u}) {
    payloads.push_back(random_vector<std::uint8_t>(bytes, 100 + bytes));
  }
  // Back to back, before any reply is read: the prefix buffer is reused in order.
  for (const auto& payload : payloads) c.send_request(operation::transform, payload);
  for (const auto& payload : payloads) check_reply(reply_within_patience(c), operation::transform, payload);
  for (const auto& payload : payloads) {
    c.send_request(operation::checksum, payload);
    check_reply(reply_within_patience(c), operation::checksum, payload);
  }
}

BOOST_AUTO_TEST_CASE(many_connections_share_a_fixed_pool_of_lanes) {
  pipeline::server_options options = small_server_options();
  options.gpu_lanes = 2;
  start(options);
  pipeline::load_options load;
  load.server = srv->endpoint();
  load.connections = 8;
  load.requests_per_connection = 6;
  load.min_bytes = 1;
  load.max_bytes = 128 << 10;
  load.checksum_every = 3;
  load.threads = 2;
  load.label = "";
  const pipeline::load_report report = pipeline::run_load(load);
  for (const std::string& message : report.failure_messages) BOOST_ERROR(message);
  BOOST_CHECK_EQUAL(report.requests, 8u * 6u);
  BOOST_CHECK_LE(streams(), 2u);
  BOOST_CHECK_LE(srv->lanes().opened, 2u);
  BOOST_CHECK(srv->metrics_text().find("pipeline_gpu_lanes_limit{stage=\"ferry\"} 2") != std::string::npos);
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(requests_wait_for_a_lane_without_holding_a_thread) {
  pipeline::server_options options = small_server_options();
  options.gpu_lanes = 1;
  options.io_threads = 1;  // a waiting request that held the thread would stop everything below
  start(options, 1);
  client first(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(200000, 110);
  first.send_request(operation::transform, a);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->lanes().busy == 1; }));
  // Two more connections, one with three requests back to back: they wait for the one lane.
  client second(srv->endpoint());
  client third(srv->endpoint());
  std::vector<std::vector<std::uint8_t>> queued;
  for (std::uint64_t i = 0; i < 3; ++i) queued.push_back(random_vector<std::uint8_t>(30000 + 5000 * i, 111 + i));
  for (const auto& payload : queued) second.send_request(operation::transform, payload);
  const auto c = random_vector<std::uint8_t>(77777, 120);
  third.send_request(operation::checksum, c);
  BOOST_REQUIRE(eventually([&] { return srv->lanes().waiting == 2; }));
  // The io thread is free: a scrape is answered and bad input gets its reply.
  BOOST_CHECK(http_get(srv->metrics_endpoint(), "/metrics").find("pipeline_gpu_lanes_waiting{stage=\"ferry\"} 2") !=
              std::string::npos);
  client bad(srv->endpoint());
  bad.send_header(1, 16, 0x50545448);
  BOOST_CHECK_EQUAL(pipeline::to_string(reply_within_patience(bad).header.status), pipeline::to_string(status::bad_magic));

  open_gates();
  check_reply(reply_within_patience(first), operation::transform, a);
  for (const auto& payload : queued) check_reply(reply_within_patience(second), operation::transform, payload);
  check_reply(reply_within_patience(third), operation::checksum, c);
  BOOST_CHECK_EQUAL(streams(), 1u);
}

BOOST_AUTO_TEST_CASE(a_request_past_its_deadline_while_waiting_for_a_lane_gets_deadline_exceeded) {
  pipeline::server_options options = small_server_options();
  options.gpu_lanes = 1;
  options.request_deadline = std::chrono::seconds(1);  // the requests after it meet it on a slow machine too
  start(options, 1);
  client first(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(10000, 130);
  first.send_request(operation::transform, a);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->lanes().busy == 1; }));
  client second(srv->endpoint());
  const auto b = random_vector<std::uint8_t>(20000, 131);
  second.send_request(operation::transform, b);
  // Answered while the lane is still held back: the wait itself ran out.
  const reply late = reply_within_patience(second);
  BOOST_CHECK_EQUAL(pipeline::to_string(late.header.status), pipeline::to_string(status::deadline_exceeded));
  BOOST_CHECK_MESSAGE(late.text().find("waited for a GPU lane") != std::string::npos, late.text());
  BOOST_CHECK_EQUAL(srv->lanes().busy, 1u);
  BOOST_CHECK_EQUAL(srv->lanes().waiting, 0u);
  open_gates();
  BOOST_CHECK_EQUAL(pipeline::to_string(reply_within_patience(first).header.status),
                    pipeline::to_string(status::deadline_exceeded));
  // Both connections go on, on the lane given back.
  for (client* c : {&first, &second}) {
    const auto next = random_vector<std::uint8_t>(4321, 132);
    c->send_request(operation::transform, next);
    check_reply(reply_within_patience(*c), operation::transform, next);
  }
  BOOST_CHECK_EQUAL(srv->lanes().busy, 0u);  // given back before the reply is written
  // The lease goes back once the reply is written, which the client may have read already.
  BOOST_CHECK(eventually([&] { return srv->memory().leased_bytes == 0; }));
}

BOOST_AUTO_TEST_CASE(large_payloads_wait_their_turn_while_small_ones_are_served) {
  pipeline::server_options options = small_server_options();
  options.large_payload_bytes = 100000;
  options.large_payloads_at_once = 1;
  start(options);
  // The first large payload arrives only in part: past its prefix, it holds the one place while the
  // server waits for the rest (as a slow client's would).
  client first(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(300000, 140);
  const std::size_t sent_first = options.payload_prefix_bytes + 1000;
  first.send_header(static_cast<std::uint32_t>(operation::transform), a.size());
  first.send_raw(a.data(), sent_first);
  BOOST_REQUIRE(eventually([&] { return srv->large_payloads()->inside == 1; }));
  // A second large payload waits at the gate, its prefix read and no buffer leased for it.
  client second(srv->endpoint());
  const auto b = random_vector<std::uint8_t>(200000, 141);
  second.send_request(operation::checksum, b);
  BOOST_REQUIRE(eventually([&] { return srv->large_payloads()->waiting == 1; }));
  // The first holds a pair of four times its prefix, its buffers growing as the rest arrives.
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, pipeline::buffer_pool::class_of(4 * options.payload_prefix_bytes));
  BOOST_CHECK(srv->metrics_text().find("pipeline_large_payloads_waiting{stage=\"ferry\"} 1") != std::string::npos);
  BOOST_CHECK(srv->metrics_text().find("pipeline_large_payloads_limit{stage=\"ferry\"} 1") != std::string::npos);
  // Payloads below the threshold do not wait for it: served meanwhile.
  for (std::size_t bytes : {1u, 4096u, 99999u}) check_served(*srv, bytes, 142 + bytes);
  BOOST_CHECK_EQUAL(srv->large_payloads()->waiting, 1u);

  first.send_raw(a.data() + sent_first, a.size() - sent_first);
  check_reply(reply_within_patience(first), operation::transform, a);
  check_reply(reply_within_patience(second), operation::checksum, b);
  BOOST_CHECK(eventually([&] { return srv->large_payloads()->inside == 0; }));
  BOOST_CHECK_EQUAL(srv->large_payloads()->waiting, 0u);
  first.close();
  second.close();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(a_large_payload_past_its_deadline_at_the_gate_gets_deadline_exceeded) {
  pipeline::server_options options = small_server_options();
  options.large_payload_bytes = 100000;
  options.large_payloads_at_once = 1;
  options.request_deadline = std::chrono::seconds(1);  // the request after it meets it on a slow machine too
  start(options, 1);
  client first(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(150000, 150);
  first.send_request(operation::transform, a);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->large_payloads()->inside == 1; }));
  client second(srv->endpoint());
  const auto b = random_vector<std::uint8_t>(250000, 151);
  second.send_request(operation::transform, b);
  const reply late = reply_within_patience(second);
  BOOST_CHECK_EQUAL(pipeline::to_string(late.header.status), pipeline::to_string(status::deadline_exceeded));
  BOOST_CHECK_MESSAGE(late.text().find("its turn among large payloads") != std::string::npos, late.text());
  // Its payload was never read: the connection cannot go on.
  BOOST_CHECK(second.readable_within(patience) && second.closed_by_server());
  BOOST_CHECK_EQUAL(srv->large_payloads()->waiting, 0u);
  BOOST_CHECK_EQUAL(srv->large_payloads()->inside, 1u);
  open_gates();
  BOOST_CHECK_EQUAL(pipeline::to_string(reply_within_patience(first).header.status),
                    pipeline::to_string(status::deadline_exceeded));
  // The pass went back with the first request: the next large one goes straight through.
  const auto next = random_vector<std::uint8_t>(400000, 152);
  first.send_request(operation::transform, next);
  check_reply(reply_within_patience(first), operation::transform, next);
  BOOST_CHECK(eventually([&] { return srv->large_payloads()->inside == 0; }));
  first.close();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(shutdown_releases_what_waiting_and_silent_connections_hold) {
  pipeline::server_options options = small_server_options();
  options.gpu_lanes = 1;
  options.shutdown_grace = milliseconds(3000);
  start(options, 1);
  client running(srv->endpoint());
  const auto a = random_vector<std::uint8_t>(50000, 140);
  running.send_request(operation::transform, a);
  BOOST_REQUIRE(eventually([&] { return gates_placed() == 1 && srv->lanes().busy == 1; }));
  client waiting(srv->endpoint());
  const auto b = random_vector<std::uint8_t>(60000, 141);
  waiting.send_request(operation::transform, b);
  BOOST_REQUIRE(eventually([&] { return srv->lanes().waiting == 1; }));
  client mid_prefix(srv->endpoint());  // a header and a few payload bytes: no lease yet
  const auto head = header_bytes(operation::transform, 500000);
  const std::uint64_t read_before = srv->metrics().received_bytes();
  mid_prefix.send_raw(head.data(), head.size());
  mid_prefix.send_raw(a.data(), 100);
  client mid_header(srv->endpoint());
  mid_header.send_raw(head.data(), 5);
  // mid_prefix's header read before the shutdown begins (a header read after it is answered
  // shutting_down, as a request that arrived late).
  BOOST_REQUIRE(eventually([&] {
    return srv->metrics().connections_open() == 4 && srv->metrics().received_bytes() >= read_before + head.size();
  }));

  srv->shutdown();
  open_gates();
  BOOST_CHECK(mid_header.readable_within(patience) && mid_header.closed_by_server());  // idle: closed at once
  check_reply(reply_within_patience(running), operation::transform, a);
  check_reply(reply_within_patience(waiting), operation::transform, b);
  BOOST_CHECK(mid_prefix.readable_within(patience) && mid_prefix.closed_by_server());  // at the grace's end
  srv->wait();
  BOOST_CHECK_EQUAL(srv->metrics().connections_open(), 0);
  BOOST_CHECK_EQUAL(srv->memory().leased_bytes, 0u);
  BOOST_CHECK_EQUAL(srv->lanes().busy, 0u);
  BOOST_CHECK_EQUAL(srv->lanes().waiting, 0u);
}

// Payloads that stop past their prefix: each holds a pair of at most four times what it sent, not one of
// its announced length, so however many stall (up to the connection limit) an ordinary request is served
// at once. With the lease of the announced length these took the whole budget.
BOOST_AUTO_TEST_CASE(stalled_payloads_hold_memory_in_proportion_to_what_arrived_while_others_are_served) {
  pipeline::server_options options = small_server_options();
  options.max_payload_bytes = std::size_t{16} << 20;
  options.memory_budget_bytes = std::size_t{256} << 20;
  options.max_connections = 64;
  options.min_payload_bytes_per_second = 0;  // they stall for the whole test
  start(options);
  const std::size_t stalled_at = options.payload_prefix_bytes + 1;
  const auto part = random_vector<std::uint8_t>(stalled_at, 150);
  std::vector<std::unique_ptr<client>> stallers;
  for (int i = 0; i < 62; ++i) {
    stallers.push_back(std::make_unique<client>(srv->endpoint()));
    const auto head = header_bytes(operation::transform, options.max_payload_bytes);
    stallers.back()->send_raw(head.data(), head.size());
    stallers.back()->send_raw(part.data(), part.size());
  }
  // Every prefix read (those that found no room to grow yet wait for it with the byte past it unread).
  const std::uint64_t prefixes = stallers.size() * (pipeline::request_header_bytes + options.payload_prefix_bytes);
  BOOST_REQUIRE(eventually([&] { return srv->metrics().received_bytes() >= prefixes; }));
  std::this_thread::sleep_for(milliseconds(300));  // time to lease more, were the server to
  // Each pair of the stallers that reserved room to grow is the class of four prefixes.
  const std::size_t first_pair = pipeline::buffer_pool::class_of(4 * options.payload_prefix_bytes);
  BOOST_CHECK_LE(srv->memory().leased_bytes, stallers.size() * first_pair);
  BOOST_CHECK_GT(srv->memory().leased_bytes, 0u);

  for (std::uint64_t i = 0; i < 3; ++i) {
    const auto asked = std::chrono::steady_clock::now();
    check_served(*srv, 4096, 151 + i);
    BOOST_CHECK_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count(), 2.0);
  }
  check_served(*srv, 4 * options.payload_prefix_bytes, 155);  // the largest request that never grows

  // A staller that goes on is served in full, its pairs growing with what arrives (the others leave
  // first: it may be among those waiting for room to grow, which they reserved).
  stallers.resize(1);
  const auto rest = random_vector<std::uint8_t>(options.max_payload_bytes - stalled_at, 156);
  std::vector<std::uint8_t> whole(part);
  whole.insert(whole.end(), rest.begin(), rest.end());
  stallers[0]->send_raw(rest.data(), rest.size());
  check_reply(reply_within_patience(*stallers[0]), operation::transform, whole);
  stallers.clear();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_CASE(a_payload_slower_than_the_minimum_rate_is_ended_and_its_memory_returned) {
  pipeline::server_options options = small_server_options();
  options.min_payload_bytes_per_second = std::size_t{1} << 20;
  start(options);
  client slow(srv->endpoint());
  const auto head = header_bytes(operation::transform, options.max_payload_bytes);
  const auto part = random_vector<std::uint8_t>(options.payload_prefix_bytes + 1000, 160);
  const auto sent = std::chrono::steady_clock::now();
  slow.send_raw(head.data(), head.size());
  slow.send_raw(part.data(), part.size());
  BOOST_REQUIRE(eventually([&] { return srv->memory().leased_bytes > 0; }));
  const reply r = reply_within_patience(slow);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  BOOST_CHECK_EQUAL(pipeline::to_string(r.header.status), pipeline::to_string(status::deadline_exceeded));
  BOOST_CHECK_MESSAGE(r.text().find("slower than the server's minimum of 1048576 bytes per second") != std::string::npos &&
                          r.text().find(std::to_string(part.size()) + " of 1048576 bytes arrived") != std::string::npos,
                      r.text());
  // The step after the prefix (to four prefixes) gets a second of slack plus its bytes at the rate.
  BOOST_CHECK_GE(waited, 1.0);
  BOOST_CHECK_LT(waited, 10.0);
  BOOST_CHECK(slow.readable_within(patience) && slow.closed_by_server());
  BOOST_CHECK_EQUAL(srv->metrics().errors(pipeline::error_kind::payload_too_slow), 1u);
  BOOST_CHECK(srv->metrics_text().find("pipeline_errors_total{stage=\"ferry\",kind=\"payload_too_slow\"} 1") !=
              std::string::npos);
  check_nothing_held(*this);
}

// Growing requests never hold the budget between them while each waits for more: more of them than
// the budget holds at their full size, sent in pieces at once, all complete.
BOOST_AUTO_TEST_CASE(payloads_growing_at_once_beyond_the_budget_all_arrive_whole) {
  pipeline::server_options options = small_server_options();  // 1 MiB maximum, 4 MiB budget
  start(options);
  constexpr std::size_t senders = 12;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::vector<std::unique_ptr<client>> clients;
  for (std::size_t i = 0; i < senders; ++i) {
    payloads.push_back(random_vector<std::uint8_t>(options.max_payload_bytes - 977 * i, 170 + i));
    clients.push_back(std::make_unique<client>(srv->endpoint()));
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < senders; ++i) {
    threads.emplace_back([&, i] {
      const auto head = header_bytes(operation::transform, payloads[i].size());
      clients[i]->send_raw(head.data(), head.size());
      for (std::size_t at = 0; at < payloads[i].size(); at += 50000) {
        clients[i]->send_raw(payloads[i].data() + at, std::min<std::size_t>(50000, payloads[i].size() - at));
        std::this_thread::sleep_for(milliseconds(2));
      }
    });
  }
  for (std::size_t i = 0; i < senders; ++i) check_reply(reply_within_patience(*clients[i]), operation::transform, payloads[i]);
  for (auto& t : threads) t.join();
  BOOST_CHECK_LE(srv->memory().leased_bytes + srv->memory().idle_bytes, options.memory_budget_bytes);
  clients.clear();
  check_nothing_held(*this);
}

BOOST_AUTO_TEST_SUITE_END()
