// Which pool stream takes work given no stream (engine/async/pool_streams.hpp): work one at a time keeps
// to one stream; work that finds it busy goes to an idle one, else to the next in turn; a stream whose
// work is all done is taken again; counts from many threads at once all come back.
#include "engine/async/pool_streams.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <thread>
#include <vector>

using namespace ferry::detail;

namespace {

// Streams the pool only hands out, never calls the driver with.
CUstream fake_stream(std::uintptr_t n) { return reinterpret_cast<CUstream>(0x1000 + n * 0x10); }

struct four_streams {
  pool_streams pool;
  four_streams() {
    pool.reserve(4);
    for (std::uintptr_t i = 0; i < 4; ++i) pool.add(fake_stream(i));
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(pool_streams_choice, four_streams)

BOOST_AUTO_TEST_CASE(work_one_at_a_time_keeps_to_one_stream) {
  for (int i = 0; i < 100; ++i) {
    pool_streams::choice taken = pool.take();
    BOOST_TEST(taken.stream == fake_stream(0), "op " << i);
  }  // each op's work done before the next
}

BOOST_AUTO_TEST_CASE(work_that_finds_the_stream_busy_goes_to_an_idle_one_then_in_turn) {
  std::vector<pool_streams::choice> held;
  for (std::uintptr_t i = 0; i < 4; ++i) {
    held.push_back(pool.take());
    BOOST_TEST(held.back().stream == fake_stream(i));
  }
  // All four busy: the next in turn after the last one taken, then on round.
  held.push_back(pool.take());
  BOOST_TEST(held.back().stream == fake_stream(0));
  held.push_back(pool.take());
  BOOST_TEST(held.back().stream == fake_stream(1));
  // Stream 2's work done: it is the idle one, and it takes the work after it too while idle again.
  held[2].held.reset();
  {
    pool_streams::choice taken = pool.take();
    BOOST_TEST(taken.stream == fake_stream(2));
  }
  BOOST_TEST(pool.take().stream == fake_stream(2));
  // Everything done: one stream again, the last one taken.
  held.clear();
  for (int i = 0; i < 10; ++i) BOOST_TEST(pool.take().stream == fake_stream(2));
}

BOOST_AUTO_TEST_CASE(counts_taken_and_given_back_by_many_threads_all_come_back) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this] {
      std::vector<pool_streams::choice> held;
      for (int i = 0; i < 20000; ++i) {
        held.push_back(pool.take());
        if (held.size() == 3) held.clear();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  BOOST_TEST(pool.in_flight() == 0u);
  const pool_streams::choice first = pool.take();
  BOOST_TEST(pool.in_flight() == 1u);
  BOOST_TEST(pool.take().stream != first.stream);
}

BOOST_AUTO_TEST_CASE(a_moved_choice_holds_its_count_once) {
  pool_streams::choice taken = pool.take();
  pool_streams::choice moved = std::move(taken);
  BOOST_TEST(pool.take().stream == fake_stream(1));  // stream 0 still busy
  moved.held.reset();
  BOOST_TEST(pool.take().stream == fake_stream(1));  // stream 1 taken last, idle
  taken.held.reset();                                 // moved from: gives back nothing
  pool_streams::choice again = pool.take();
  BOOST_TEST(again.stream == fake_stream(1));
  BOOST_TEST(pool.take().stream == fake_stream(2));  // 1 busy, 2 the first idle one after it
}

BOOST_AUTO_TEST_SUITE_END()
