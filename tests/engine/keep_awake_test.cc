// Keeping the handler's io_context awake while completions are owed to it (engine_options::executor_spin):
// a thread running the context keeps running handlers instead of parking, stops shortly after nothing is
// owed (keep_awake::linger), and nothing of the kind happens for executors that are not an io_context's,
// or when it is turned off. A completion that arrives while the kept-awake thread waits is handed to it
// (the mailbox): handlers still run once each, in their ops' order, on the io thread, and one that throws
// leaves io.run as a posted one would.
#include "ferry/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <cstdint>
#include <functional>
#include <future>
#include <vector>

#include "ferry/detail/keep_awake.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t count = 4096;

engine_options with_spin(std::chrono::microseconds spin) {
  engine_options options;
  options.executor_spin = spin;
  return options;
}

// Handlers run within `how_long`, one at a time, the clock read between them. (io.poll() would not
// return while the keep-awake task re-queues itself: it runs on until the task stops.)
std::size_t handlers_run_for(asio::io_context& io, std::chrono::milliseconds how_long) {
  std::size_t ran = 0;
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    io.restart();
    ran += io.poll_one();
  }
  return ran;
}

struct gated_poke {
  std::vector<std::uint32_t> values = random_vector<std::uint32_t>(count, 811);
  device_buffer<std::uint32_t> destination = device_buffer<std::uint32_t>::allocate(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate{s};
};

// Pokes `pending`'s values through its gated stream; the handler, on `io`, checks the op succeeded and
// sets `done`.
void poke_gated(engine& gpu, gated_poke& pending, bool& done) {
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           [&done](boost::system::error_code error, std::size_t bytes) {
             BOOST_TEST(!error);
             BOOST_TEST(bytes == count * 4);
             done = true;
           });
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(keep_awake, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(an_io_context_owed_a_completion_keeps_running_until_it_arrives_then_parks) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  gated_poke pending;
  bool done = false;
  poke_gated(gpu, pending, done);
  // Held back by the gate: the context is kept busy with the keep-awake task, not the handler.
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) > 10u);
  BOOST_TEST(!done);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
  BOOST_TEST(peek_list_array(count, device_ptr<const std::uint32_t>(pending.destination.get())) == pending.values);
  // Nothing is owed any more: the task ends once the linger (the poller's spin, at most
  // max_spin_window) has passed, and the context parks again.
  handlers_run_for(io, std::chrono::milliseconds(20));
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
}

BOOST_AUTO_TEST_CASE(a_turn_goes_on_for_the_linger_once_nothing_is_owed_and_for_executor_spin_while_something_is) {
  // The task's own rule, on a registry of its own: no engine, no clock but the recorded activity.
  using task = detail::keep_awake<asio::io_context::executor_type>;
  asio::io_context io;
  auto registry = std::make_shared<detail::pending_handlers::registry>();
  const auto ticks = [](auto duration) {
    return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::steady_clock::duration>(duration).count());
  };
  // The linger is the io_context's, set by each submission (the latest op's engine's).
  const std::chrono::microseconds linger(1000);
  registry->linger.store(ticks(linger));
  const task long_spin{registry, io.get_executor(), std::chrono::seconds(10)};
  const task short_spin{registry, io.get_executor(), std::chrono::microseconds(50)};
  const auto active_ago = [&](std::chrono::microseconds ago) {
    registry->last_activity.store(detail::steady_ticks() - ticks(ago));
  };
  // Nothing owed: on for `linger` after the last submission or completion, then off. (Asked again when
  // this thread was held up past the linger between the two steps, as a loaded machine may do.)
  const auto wanted_right_after_activity = [&](const task& t) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const auto before = std::chrono::steady_clock::now();
      active_ago(std::chrono::microseconds(0));
      const bool on = t.wanted();
      if (on || std::chrono::steady_clock::now() - before < linger) return on;
    }
    return false;
  };
  BOOST_TEST(wanted_right_after_activity(long_spin));
  active_ago(linger + std::chrono::microseconds(50));
  BOOST_TEST(!long_spin.wanted());
  // Owed a completion: on for executor_spin.
  registry->owed.store(1);
  BOOST_TEST(long_spin.wanted());
  active_ago(std::chrono::seconds(11));
  BOOST_TEST(!long_spin.wanted());
  // The linger never outlasts a shorter executor_spin.
  registry->owed.store(0);
  active_ago(std::chrono::microseconds(70));
  BOOST_TEST(!short_spin.wanted());
  // A shut-down context is never kept awake.
  active_ago(std::chrono::microseconds(0));
  registry->shut_down_seen.store(true);
  BOOST_TEST(!long_spin.wanted());
}

BOOST_AUTO_TEST_CASE(once_nothing_is_owed_the_context_is_kept_awake_for_the_pollers_spin_window) {
  asio::io_context io;
  engine_options options = with_spin(std::chrono::seconds(10));
  options.spin_window = std::chrono::milliseconds(200);
  engine gpu{io.get_executor(), options};
  gated_poke pending;
  bool done = false;
  poke_gated(gpu, pending, done);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
  const auto completed = std::chrono::steady_clock::now();
  // Well inside the window (a default window's 1 ms long past): still turning, 50 to 70 ms after it.
  const std::size_t early = handlers_run_for(io, std::chrono::milliseconds(50));
  const std::size_t later = handlers_run_for(io, std::chrono::milliseconds(20));
  if (std::chrono::steady_clock::now() - completed < std::chrono::milliseconds(150)) {
    BOOST_TEST(early > 10u);
    BOOST_TEST(later > 0u);
  } else {
    BOOST_TEST_MESSAGE("this thread was held up past most of the window; the lingering was not checked");
  }
  // Past it: the task ends (at most one more turn), and the context parks again.
  handlers_run_for(io, std::chrono::milliseconds(250));
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  BOOST_TEST(peek_list_array(count, device_ptr<const std::uint32_t>(pending.destination.get())) == pending.values);
}

BOOST_AUTO_TEST_CASE(the_task_stops_after_executor_spin_without_activity) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::milliseconds(2))};
  gated_poke pending;
  bool done = false;
  poke_gated(gpu, pending, done);
  handlers_run_for(io, std::chrono::milliseconds(10));  // past the 2 ms: the task gives up
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_CASE(with_executor_spin_zero_a_waiting_context_runs_nothing) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::microseconds(0))};
  gated_poke pending;
  bool done = false;
  poke_gated(gpu, pending, done);
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_CASE(a_strand_of_the_io_context_is_kept_awake_and_the_handler_runs_on_the_strand) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  auto strand = asio::make_strand(io);
  gated_poke pending;
  bool on_strand = false, done = false;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           asio::bind_executor(strand, [&](boost::system::error_code error, std::size_t) {
             BOOST_TEST(!error);
             on_strand = strand.running_in_this_thread();
             done = true;
           }));
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) > 10u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
  BOOST_TEST(on_strand);
}

BOOST_AUTO_TEST_CASE(use_future_is_not_an_io_context_so_nothing_spins_for_it) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  gated_poke pending;
  std::future<std::size_t> bytes =
      gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s, asio::use_future);
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(bytes.get() == count * 4);
}

std::size_t handed_over(asio::io_context& io) {
  return asio::use_service<detail::pending_handlers>(io).shared_registry()->handed_over.load();
}

BOOST_AUTO_TEST_CASE(completions_handed_to_the_waiting_io_thread_run_once_each_in_order_on_it) {
  // 200 pokes one after another on one stream, each started by the previous one's handler.
  const int ops = 200;
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  std::vector<std::vector<std::uint32_t>> values;
  for (int i = 0; i < ops; ++i) values.push_back(random_vector<std::uint32_t>(count, 900 + i));
  auto destination = device_buffer<std::uint32_t>::allocate(count * ops);
  auto source = pinned_buffer<std::uint32_t>::allocate(count * ops);
  for (int i = 0; i < ops; ++i) std::copy(values[i].begin(), values[i].end(), source.data() + i * count);
  stream s = stream::create();
  std::vector<int> order;
  int failures = 0;
  bool on_io_thread = true;
  const auto io_thread = std::this_thread::get_id();
  std::function<void(int)> start = [&](int i) {
    gpu.poke(pinned_span(host_ptr<const std::uint32_t>(source.get() + i * count), count), destination.get() + i * count, s,
             [&, i](boost::system::error_code error, std::size_t bytes) {
               if (error || bytes != count * 4) ++failures;
               on_io_thread = on_io_thread && std::this_thread::get_id() == io_thread;
               order.push_back(i);
               if (i + 1 < ops) start(i + 1);
             });
  };
  start(0);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return order.size() == static_cast<std::size_t>(ops); },
                                       std::chrono::seconds(30)));
  BOOST_TEST(failures == 0);
  BOOST_TEST(on_io_thread);
  BOOST_TEST_REQUIRE(order.size() == static_cast<std::size_t>(ops));
  for (int i = 0; i < ops; ++i) BOOST_TEST_REQUIRE(order[i] == i);
  const auto back = peek_list_array(count * ops, device_ptr<const std::uint32_t>(destination.get()));
  for (int i = 0; i < ops; ++i) {
    BOOST_TEST_REQUIRE(std::equal(values[i].begin(), values[i].end(), back.begin() + i * count));
  }
  BOOST_TEST_MESSAGE(handed_over(io) << " of " << ops << " completions handed to the waiting io thread");
  BOOST_TEST(handed_over(io) > 0u);  // the path under test was taken
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
}

BOOST_AUTO_TEST_CASE(a_completion_posted_before_one_handed_over_runs_first) {
  // The engine's handler machinery driven by hand, while a keep-awake turn waits: completion 1 does not
  // keep the io_context awake (spin 0), so it is always posted; completion 2 does, and is handed to the
  // turn when the turn still waits. Completion 2's handler must not overtake completion 1's, still queued;
  // the turn then posts it behind completion 1. Completion 3, handed to the next turn once that one
  // waits, must not overtake completion 2's.
  auto deliver = [](auto&& handler, boost::system::error_code error, std::size_t bytes) {
    std::move(handler)(error, bytes);
  };
  using deliver_type = decltype(deliver);
  using completion_type = detail::handler_completion<std::function<void(boost::system::error_code, std::size_t)>,
                                                     deliver_type>;
  // Completion 2 is handed over only when it beats the turn, which stops waiting once completion 1 is
  // posted: rounds are repeated until that happened a few times (or 10 s passed: sanitizers slow it).
  std::size_t rounds_handed = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int round = 0; round < 20000 && rounds_handed < 5 && std::chrono::steady_clock::now() < give_up; ++round) {
    asio::io_context io;
    const auto registry = asio::use_service<detail::pending_handlers>(io).shared_registry();
    std::vector<int> order;  // the io thread's
    auto record = [&](boost::system::error_code, std::size_t which) { order.push_back(static_cast<int>(which)); };
    // Kept awake while owed; once all three have run, the task stops within 1 ms and run() returns.
    const detail::awake_times kept{std::chrono::seconds(10), std::chrono::milliseconds(1)};
    completion_type first(record, io.get_executor(), deliver, detail::awake_times{});
    completion_type second(record, io.get_executor(), deliver, kept);
    completion_type third(record, io.get_executor(), deliver, kept);
    for (completion_type* each : {&first, &second, &third}) each->enlist({});  // no op owns them here
    const std::size_t handed_before = registry->handed_over.load();
    auto work = asio::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    auto wait_while_mailbox_open = [&](bool open) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (registry->mailbox_open() == open && std::chrono::steady_clock::now() < deadline) {
      }
    };
    wait_while_mailbox_open(false);
    first.complete({}, 1);   // posted
    second.complete({}, 2);  // handed over if the turn still waits, else posted behind completion 1
    if (registry->handed_over.load() > handed_before) {
      ++rounds_handed;
      wait_while_mailbox_open(true);   // the turn that took completion 2 ends
      wait_while_mailbox_open(false);  // and the next one waits
    }
    third.complete({}, 3);
    work.reset();
    runner.join();
    BOOST_TEST_REQUIRE(order.size() == 3u);
    BOOST_TEST(order[0] == 1);
    BOOST_TEST(order[1] == 2);
    BOOST_TEST(order[2] == 3);
  }
  BOOST_TEST_MESSAGE(rounds_handed << " rounds handed completion 2 over");
  BOOST_TEST(rounds_handed > 0u);  // the case under test happened
}

BOOST_AUTO_TEST_CASE(a_handler_that_throws_leaves_io_run_and_the_others_still_run_once) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  gated_poke pending;
  auto second = device_buffer<std::uint32_t>::allocate(count);
  int first_calls = 0, second_calls = 0;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           [&](boost::system::error_code, std::size_t) {
             ++first_calls;
             throw std::runtime_error("thrown by a handler");
           });
  gpu.poke(std::span<const std::uint32_t>(pending.values), second.get(), pending.s,
           [&](boost::system::error_code error, std::size_t) {
             BOOST_TEST(!error);
             ++second_calls;
           });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pending.gate.open();
  });
  int thrown = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (second_calls == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      io.restart();
      io.run_for(std::chrono::milliseconds(5));
    } catch (const std::runtime_error& error) {
      BOOST_TEST(std::string(error.what()) == "thrown by a handler");
      ++thrown;
    }
  }
  opener.join();
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(thrown == 1);
  BOOST_TEST(first_calls == 1);
  BOOST_TEST(second_calls == 1);
}

BOOST_AUTO_TEST_CASE(ops_queued_on_one_stream_complete_in_order_on_the_waiting_io_thread) {
  // Ops on one stream held back by a gate, then let go at once: their completions reach the io thread
  // close together, handed to its waiting turns or posted; the handlers still run in the ops' order.
  const int per_round = 8, rounds = 40;
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  const std::vector<std::uint32_t> values = random_vector<std::uint32_t>(count * per_round, 1301);
  auto source = pinned_buffer<std::uint32_t>::allocate(count * per_round);
  std::copy(values.begin(), values.end(), source.data());
  auto device = device_buffer<std::uint32_t>::allocate(count * per_round);
  std::vector<int> order;
  int failures = 0;
  for (int round = 0; round < rounds; ++round) {
    stream s = stream::create();
    ferry::testing::stream_gate gate{s};
    order.clear();
    for (int i = 0; i < per_round; ++i) {
      gpu.poke(pinned_span(host_ptr<const std::uint32_t>(source.get() + i * count), count), device.get() + i * count,
               s, [&, i](boost::system::error_code error, std::size_t bytes) {
                 if (error || bytes != count * 4) ++failures;
                 order.push_back(i);
               });
    }
    gate.open();
    BOOST_TEST_REQUIRE(ferry::testing::run_until(
        io, [&] { return order.size() == static_cast<std::size_t>(per_round); }, std::chrono::seconds(30)));
    for (int i = 0; i < per_round; ++i) BOOST_TEST_REQUIRE(order[i] == i);
  }
  BOOST_TEST(failures == 0);
  const auto back = peek_list_array(count * per_round, device_ptr<const std::uint32_t>(device.get()));
  BOOST_TEST(std::equal(values.begin(), values.end(), back.begin()));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
}

BOOST_AUTO_TEST_SUITE_END()
