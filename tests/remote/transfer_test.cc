// ferry::remote between two processes: put, get and messages (up to 1 MiB) with every kind of completion
// token, and 1,000 random transfers checked byte for byte against a model of the peer's memory (and 300 more with
// both workers polling), and puts initiated together each checked in place as it completes; a handler that
// throws leaves run() and the others still run.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <random>
#include <string>
#include <thread>

#include "ferry/remote.hpp"
#include "tests/remote/peer_process.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using boost::system::error_code;
using ferry::testing::check_echo;
using ferry::testing::check_same;
using ferry::testing::connected_peer;
using ferry::testing::echo_request;
using ferry::testing::fill_random;
using ferry::testing::peer_bytes;
using ferry::testing::random_bytes;
using ferry::testing::run_until;

namespace {

// The peer's memory as it is after the peer filled it with `seed`.
std::vector<std::byte> peer_memory(std::uint64_t seed) { return random_bytes(peer_bytes, seed); }

// `count` random puts and gets of 1 byte to 64 KiB at random offsets, one at a time, each get checked
// against a model of the peer's memory (filled with `seed`), then the whole memory read back and checked.
void random_transfers(connected_peer& pair, std::uint64_t seed, int count, std::uint64_t random_seed) {
  auto model = peer_memory(seed);
  std::mt19937_64 random(random_seed);
  for (int i = 0; i < count; ++i) {
    std::size_t size = 1 + random() % 65536;
    std::size_t offset = random() % (peer_bytes - size + 1);
    bool put = random() % 2 == 0;
    std::vector<std::byte> local(size);
    if (put) fill_random(std::span(local), random_seed + 1 + i);
    bool done = false;
    auto check = [&, i](error_code error, std::size_t bytes) {
      BOOST_REQUIRE_MESSAGE(!error, "transfer " << i << ": " << error.message());
      BOOST_REQUIRE_EQUAL(bytes, size);
      done = true;
    };
    if (put) {
      pair.endpoint.async_put(std::span<const std::byte>(local), pair.memory.window(offset, size), check);
    } else {
      pair.endpoint.async_get(std::span(local), pair.memory.window(offset, size), check);
    }
    run_until(pair.io, [&] { return done; });
    if (put) {
      std::copy(local.begin(), local.end(), model.begin() + offset);
    } else {
      check_same(local, std::span(model).subspan(offset, size), "random get");
    }
  }
  std::vector<std::byte> whole(peer_bytes);
  bool done = false;
  pair.endpoint.async_get(std::span(whole), pair.memory, [&](error_code error, std::size_t) {
    BOOST_REQUIRE(!error);
    done = true;
  });
  run_until(pair.io, [&] { return done; });
  check_same(whole, model, "the peer's memory after the random transfers");
}

// Sends every message at once, then receives each echo in turn and checks it byte for byte.
void check_echoes_in_order(connected_peer& pair, const std::vector<std::vector<std::byte>>& sent) {
  int sends = 0;
  for (const auto& message : sent) {
    pair.endpoint.async_send(message, [&](error_code error) {
      BOOST_TEST(!error);
      ++sends;
    });
  }
  std::vector<std::byte> echo(peer_bytes);
  for (const auto& message : sent) {
    std::optional<std::size_t> got;
    pair.endpoint.async_receive(echo, [&](error_code error, std::size_t bytes) {
      BOOST_TEST(!error);
      got = bytes;
    });
    run_until(pair.io, [&] { return got.has_value(); });
    BOOST_REQUIRE_EQUAL(*got, message.size() - 1);
    check_same(std::span(echo).first(*got), std::span(message).subspan(1), "echo in order");
  }
  run_until(pair.io, [&] { return sends == static_cast<int>(sent.size()); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(remote_transfers)

BOOST_AUTO_TEST_CASE(get_with_a_callback_reads_the_peers_memory) {
  connected_peer pair(11, peer_bytes);
  std::vector<std::byte> local(peer_bytes);
  int calls = 0;
  pair.endpoint.async_get(std::span(local), pair.memory, [&](error_code error, std::size_t bytes) {
    BOOST_TEST(!error, error.message());
    BOOST_TEST(bytes == peer_bytes);
    ++calls;
  });
  BOOST_TEST(calls == 0);  // never inside the initiating call
  run_until(pair.io, [&] { return calls > 0; });
  BOOST_TEST(calls == 1);
  check_same(local, peer_memory(11), "get");
}

BOOST_AUTO_TEST_CASE(put_with_a_future_lands_in_the_peers_memory) {
  connected_peer pair(12, peer_bytes);
  auto data = random_bytes(4096, 1201);
  std::future<std::size_t> put =
      pair.endpoint.async_put(std::span<const std::byte>(data), pair.memory.window(8192, 4096), asio::use_future);
  run_until(pair.io, [&] { return put.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  BOOST_TEST(put.get() == 4096u);
  std::vector<std::byte> back(peer_bytes);
  std::future<std::size_t> get = pair.endpoint.async_get(std::span(back), pair.memory, asio::use_future);
  run_until(pair.io, [&] { return get.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
  BOOST_TEST(get.get() == peer_bytes);
  auto expected = peer_memory(12);
  std::copy(data.begin(), data.end(), expected.begin() + 8192);
  check_same(back, expected, "put then get");
}

BOOST_AUTO_TEST_CASE(put_get_and_messages_in_a_coroutine) {
  connected_peer pair(13, peer_bytes);
  bool finished = false;
  asio::co_spawn(
      pair.io,
      [&]() -> asio::awaitable<void> {
        auto data = random_bytes(65536, 1301);
        std::size_t put = co_await pair.endpoint.async_put(std::span<const std::byte>(data),
                                                           pair.memory.window(0, 65536), asio::use_awaitable);
        BOOST_TEST(put == 65536u);
        std::vector<std::byte> back(65536);
        co_await pair.endpoint.async_get(std::span(back), pair.memory.window(0, 65536), asio::use_awaitable);
        check_same(back, data, "coroutine put then get");
        // A message and its echo, with the as_tuple token.
        auto note = echo_request(300, 1302);
        co_await pair.endpoint.async_send(note, asio::use_awaitable);
        std::vector<std::byte> echo(1024);
        auto [error, bytes] = co_await pair.endpoint.async_receive(echo, asio::as_tuple(asio::use_awaitable));
        BOOST_TEST(!error);
        check_same(std::span(echo).first(bytes), std::span(note).subspan(1), "echo");
        finished = true;
      },
      [](std::exception_ptr failure) {
        if (failure) std::rethrow_exception(failure);
      });
  run_until(pair.io, [&] { return finished; });
}

BOOST_AUTO_TEST_CASE(deferred_operations_and_a_parallel_group) {
  connected_peer pair(14, peer_bytes);
  auto first = random_bytes(4096, 1401);
  std::vector<std::byte> second(4096);
  // Deferred: nothing starts until the deferred op is launched.
  auto put = pair.endpoint.async_put(std::span<const std::byte>(first), pair.memory.window(0, 4096), asio::deferred);
  int calls = 0;
  std::move(put)([&](error_code error, std::size_t bytes) {
    BOOST_TEST(!error);
    BOOST_TEST(bytes == 4096u);
    ++calls;
  });
  run_until(pair.io, [&] { return calls == 1; });
  // A put and a get of different windows, together.
  auto third = random_bytes(4096, 1402);
  bool grouped = false;
  asio::experimental::make_parallel_group(
      pair.endpoint.async_put(std::span<const std::byte>(third), pair.memory.window(4096, 4096), asio::deferred),
      pair.endpoint.async_get(std::span(second), pair.memory.window(0, 4096), asio::deferred))
      .async_wait(asio::experimental::wait_for_all(),
                  [&](std::array<std::size_t, 2>, error_code put_error, std::size_t, error_code get_error, std::size_t) {
                    BOOST_TEST(!put_error);
                    BOOST_TEST(!get_error);
                    grouped = true;
                  });
  run_until(pair.io, [&] { return grouped; });
  check_same(second, first, "parallel group get");
  std::vector<std::byte> back(4096);
  bool read = false;
  pair.endpoint.async_get(std::span(back), pair.memory.window(4096, 4096), [&](error_code error, std::size_t) {
    BOOST_TEST(!error);
    read = true;
  });
  run_until(pair.io, [&] { return read; });
  check_same(back, third, "parallel group put");
}

BOOST_AUTO_TEST_CASE(messages_arrive_in_order_and_every_byte_is_echoed) {
  connected_peer pair(15, peer_bytes);
  std::mt19937_64 random(1501);
  std::vector<std::vector<std::byte>> sent;
  for (int i = 0; i < 50; ++i) sent.push_back(echo_request(1 + random() % 20000, 1502 + i));
  check_echoes_in_order(pair, sent);
}

// Above 64 KiB UCX sends a message in fragments (ferry's workers turn rendezvous off): each arrives
// whole, in order, every byte echoed.
BOOST_AUTO_TEST_CASE(messages_larger_than_a_segment_arrive_whole) {
  connected_peer pair(17, peer_bytes);
  std::vector<std::vector<std::byte>> sent;
  for (std::size_t size : {std::size_t{65537}, std::size_t{300001}, std::size_t{1} << 20}) {
    sent.push_back(echo_request(size, 1701 + size));
  }
  check_echoes_in_order(pair, sent);
}

BOOST_AUTO_TEST_CASE(a_thousand_random_transfers_match_a_model_of_the_peers_memory) {
  connected_peer pair(16, peer_bytes);
  random_transfers(pair, 16, 1000, 1601);
}

BOOST_AUTO_TEST_CASE(puts_initiated_together_each_complete_once_their_bytes_are_in_place) {
  // 64 puts of random sizes into disjoint windows, initiated in one handler (one flush may serve them
  // all): each handler reads its window back at once and finds every byte of its put there.
  for (auto progress : {ferry::remote::progress_mode::events, ferry::remote::progress_mode::polling}) {
    connected_peer pair(18, peer_bytes, ferry::remote::memory_kind::host, progress);
    constexpr std::size_t count = 64, slot = peer_bytes / count;
    std::mt19937_64 random(1801);
    std::vector<std::vector<std::byte>> sent(count), read(count);
    std::size_t checked = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t size = 1 + random() % slot;
      sent[i].resize(size);
      read[i].resize(size);
      fill_random(std::span(sent[i]), 1802 + i);
      const auto window = pair.memory.window(i * slot, size);
      auto check_in_place = [&, i, window](error_code error, std::size_t bytes) {
        BOOST_REQUIRE_MESSAGE(!error, "put " << i << ": " << error.message());
        BOOST_REQUIRE_EQUAL(bytes, sent[i].size());
        pair.endpoint.async_get(std::span(read[i]), window, [&, i](error_code error, std::size_t) {
          BOOST_REQUIRE_MESSAGE(!error, "get " << i << ": " << error.message());
          const std::string what = "the window of put " + std::to_string(i);
          check_same(read[i], sent[i], what.c_str());
          ++checked;
        });
      };
      pair.endpoint.async_put(std::span<const std::byte>(sent[i]), window, check_in_place);
    }
    run_until(pair.io, [&] { return checked == count; });
  }
}

BOOST_AUTO_TEST_CASE(a_handler_that_throws_leaves_run_and_every_other_handler_still_runs_once) {
  // Puts initiated together complete together (one flush), and the worker's progress pass runs their
  // handlers one after another: the exception of one leaves io_context::run as a posted handler's
  // would, and every other handler still runs, once; those bound to a strand run in the strand.
  for (auto progress : {ferry::remote::progress_mode::events, ferry::remote::progress_mode::polling}) {
    connected_peer pair(19, peer_bytes, ferry::remote::memory_kind::host, progress);
    auto strand = asio::make_strand(pair.io);
    constexpr std::size_t count = 16, size = 4096;
    std::vector<std::byte> sent = random_bytes(count * size, 1901);
    std::size_t completed = 0, in_strand = 0, thrown = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const auto bytes = std::span<const std::byte>(sent).subspan(i * size, size);
      const auto window = pair.memory.window(i * size, size);
      auto counted = [&, i](error_code error, std::size_t moved) {
        BOOST_REQUIRE_MESSAGE(!error, "put " << i << ": " << error.message());
        BOOST_REQUIRE_EQUAL(moved, size);
        ++completed;
        if (i == 0) throw std::runtime_error("the first put's handler throws");
      };
      if (i % 2 == 1) {
        auto in_the_strand = [&, counted](error_code error, std::size_t moved) {
          if (strand.running_in_this_thread()) ++in_strand;
          counted(error, moved);
        };
        pair.endpoint.async_put(bytes, window, asio::bind_executor(strand, in_the_strand));
      } else {
        pair.endpoint.async_put(bytes, window, counted);
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (completed < count && std::chrono::steady_clock::now() < deadline) {
      try {
        pair.io.run_one_for(std::chrono::milliseconds(10));
      } catch (const std::runtime_error& error) {
        BOOST_TEST(std::string(error.what()) == "the first put's handler throws");
        ++thrown;
      }
    }
    BOOST_TEST(completed == count);
    BOOST_TEST(thrown == 1u);
    BOOST_TEST(in_strand == count / 2);
    std::vector<std::byte> back(count * size);
    bool read = false;
    pair.endpoint.async_get(std::span(back), pair.memory.window(0, count * size), [&](error_code error, std::size_t) {
      BOOST_REQUIRE_MESSAGE(!error, "get: " << error.message());
      read = true;
    });
    run_until(pair.io, [&] { return read; });
    check_same(back, sent, "the puts' windows");
    check_echo(pair, 1902);
  }
}

BOOST_AUTO_TEST_CASE(polling_workers_match_a_model_of_the_peers_memory_and_go_quiet_when_idle) {
  // progress_mode::polling on both sides (as bench/remote_bandwidth runs them): every byte lands, and
  // once nothing is in flight the workers stop polling (the io_context runs nothing).
  connected_peer pair(17, peer_bytes, ferry::remote::memory_kind::host, ferry::remote::progress_mode::polling);
  random_transfers(pair, 17, 300, 1701);
  check_echo(pair, 1702);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool quiet = false;
  while (!quiet && std::chrono::steady_clock::now() < deadline) {
    quiet = pair.io.poll() == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  BOOST_TEST(quiet);
}

BOOST_AUTO_TEST_CASE(the_peer_exits_when_asked) {
  connected_peer pair(17, peer_bytes);
  const std::byte quit[] = {std::byte{'Q'}};
  std::vector<std::byte> reply(16);
  std::optional<std::size_t> got;
  pair.endpoint.async_send(quit, [](error_code error) { BOOST_TEST(!error); });
  pair.endpoint.async_receive(reply, [&](error_code error, std::size_t bytes) {
    BOOST_TEST(!error);
    got = bytes;
  });
  run_until(pair.io, [&] { return got.has_value(); });
  BOOST_TEST(*got == 1u);
  BOOST_TEST(static_cast<char>(reply[0]) == 'q');
  pair.endpoint.close();
  BOOST_TEST(pair.peer.wait() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
