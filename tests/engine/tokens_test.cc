// Every engine operation with each completion token: use_awaitable, deferred, use_future, a callback and
// as_tuple. Results are checked byte by byte on random data.
#include "ferry/engine.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t count = (3 << 20) / 4 + 11;  // pageable transfers span several staging chunks
constexpr std::size_t width = 300, height = 40, pitch = 512;

using engine_fixture = ferry::testing::engine_fixture<1 << 20, 3>;

// The expected content of a pitched device array after copy_2d of a width x height region from
// (3, 2) of `source` to (5, 4) of `before`.
std::vector<std::uint32_t> after_2d(const std::vector<std::uint32_t>& source, std::vector<std::uint32_t> before) {
  for (std::size_t row = 0; row < height; ++row) {
    for (std::size_t column = 0; column < width; ++column) {
      before[(4 + row) * pitch + 5 + column] = source[(2 + row) * pitch + 3 + column];
    }
  }
  return before;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(completion_tokens, engine_fixture)

BOOST_AUTO_TEST_CASE(every_operation_completes_through_use_awaitable) {
  auto values = random_vector<std::uint32_t>(count, 101);
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto a = gpu.allocate<std::uint32_t>(count);
    auto b = gpu.allocate<std::uint32_t>(count);
    std::size_t moved = co_await gpu.poke(std::span<const std::uint32_t>(values), a.get(), asio::use_awaitable);
    BOOST_TEST(moved == count * 4);
    moved = co_await gpu.copy(device_ptr<const std::uint32_t>(a.get()), b.get(), count, asio::use_awaitable);
    BOOST_TEST(moved == count * 4);
    std::vector<std::uint32_t> back(count);
    ferry::testing::poison_fill(std::span(back));
    moved = co_await gpu.peek(device_ptr<const std::uint32_t>(b.get()), std::span<std::uint32_t>(back), asio::use_awaitable);
    BOOST_TEST(moved == count * 4);
    BOOST_TEST(same_bytes(back, values));

    // Vectors the caller keeps are borrowed.
    std::vector<std::uint32_t> borrowed(count);
    ferry::testing::poison_fill(std::span(borrowed));
    co_await gpu.poke(values, b.get(), asio::use_awaitable);
    co_await gpu.peek(device_ptr<const std::uint32_t>(b.get()), borrowed, asio::use_awaitable);
    BOOST_TEST(same_bytes(borrowed, values));

    // Owned vectors travel with the op and come back in the completion.
    std::vector<std::uint32_t> returned = co_await gpu.poke(std::vector<std::uint32_t>(values), b.get(), asio::use_awaitable);
    BOOST_TEST(same_bytes(returned, values));
    std::vector<std::uint32_t> fresh = co_await gpu.peek(device_ptr<const std::uint32_t>(b.get()), count, asio::use_awaitable);
    BOOST_TEST(same_bytes(fresh, values));

    // Pinned memory, memset, 2-D, peer, prefetch, wait_all.
    pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(count);
    co_await gpu.memset(a.get(), count, 0x5a5a1234u, asio::use_awaitable);
    co_await gpu.peek(a.get(), pinned.span(), asio::use_awaitable);
    BOOST_CHECK(std::all_of(pinned.data(), pinned.data() + count, [](std::uint32_t v) { return v == 0x5a5a1234u; }));
    std::copy(values.begin(), values.end(), pinned.data());
    co_await gpu.poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), count), a.get(), asio::use_awaitable);

    stream s = stream::create();
    auto before = random_vector<std::uint32_t>(pitch * 50, 102);
    poke_array(before.size(), before.data(), b.get());
    co_await gpu.copy_2d(pitched_view(device_ptr<const std::uint32_t>(a.get()), pitch, width, height, 3, 2),
                         pitched_view(b.get(), pitch, width, height, 5, 4), s, asio::use_awaitable);
    BOOST_TEST(same_bytes(peek_list_array(before.size(), b.get()), after_2d(values, before)));

    context second = context::create(device::get(0));
    co_await gpu.copy_peer(device_ptr<const std::uint32_t>(a.get()), gpu.context(), b.get(), second, count,
                           asio::use_awaitable);
    BOOST_TEST(same_bytes(peek_list_array(count, b.get()), values));

    managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(1024);
    std::copy(values.begin(), values.begin() + 1024, managed.host_span().begin());
    co_await gpu.prefetch(managed.get(), 1024, memory_location::on(device::get(0)), asio::use_awaitable);
    co_await gpu.prefetch(managed.get(), 1024, memory_location::host(), asio::use_awaitable);
    BOOST_CHECK(std::equal(values.begin(), values.begin() + 1024, managed.host_span().begin()));
    co_await gpu.wait_all(asio::use_awaitable);
    finished = true;
  }, [](std::exception_ptr error) { if (error) std::rethrow_exception(error); });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return finished; }));
}

BOOST_AUTO_TEST_CASE(every_operation_completes_through_a_callback_exactly_once) {
  auto values = random_vector<std::uint32_t>(count, 103);
  auto a = gpu.allocate<std::uint32_t>(count);
  auto b = gpu.allocate<std::uint32_t>(count);
  std::vector<std::uint32_t> back(count);
  ferry::testing::poison_fill(std::span(back));
  int calls = 0;
  boost::system::error_code last;
  auto count_call = [&](boost::system::error_code error, auto&&...) { ++calls; last = error; };
  gpu.poke(std::span<const std::uint32_t>(values), a.get(), count_call);
  BOOST_TEST(calls == 0);  // never inside the initiating call
  BOOST_TEST(ferry::testing::run_until(io, [&] { return calls == 1; }));
  gpu.copy(device_ptr<const std::uint32_t>(a.get()), b.get(), count, count_call);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return calls == 2; }));
  gpu.peek(device_ptr<const std::uint32_t>(b.get()), std::span<std::uint32_t>(back), count_call);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return calls == 3; }));
  BOOST_TEST(same_bytes(back, values));
  gpu.memset(b.get(), count, std::uint32_t{7}, count_call);
  gpu.wait_all(count_call);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return calls == 5; }));
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 5);
  BOOST_TEST(!last);
}

BOOST_AUTO_TEST_CASE(every_operation_completes_through_use_future) {
  auto values = random_vector<std::uint32_t>(count, 104);
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  auto a = gpu.allocate<std::uint32_t>(count);
  auto b = gpu.allocate<std::uint32_t>(count);
  BOOST_TEST(gpu.poke(std::span<const std::uint32_t>(values), a.get(), asio::use_future).get() == count * 4);
  BOOST_TEST(gpu.copy(device_ptr<const std::uint32_t>(a.get()), b.get(), count, asio::use_future).get() == count * 4);
  std::vector<std::uint32_t> back = gpu.peek(device_ptr<const std::uint32_t>(b.get()), count, asio::use_future).get();
  BOOST_TEST(same_bytes(back, values));
  gpu.memset(a.get(), count, std::uint32_t{9}, asio::use_future).get();
  gpu.wait_all(asio::use_future).get();
  BOOST_TEST(peek_list_array(1, a.get())[0] == 9u);
  guard.reset();
  runner.join();
}

BOOST_AUTO_TEST_CASE(deferred_operations_start_only_when_launched) {
  auto values = random_vector<std::uint32_t>(count, 105);
  auto a = gpu.allocate<std::uint32_t>(count);
  std::vector<std::uint32_t> back(count);
  ferry::testing::poison_fill(std::span(back));
  auto poke = gpu.poke(std::span<const std::uint32_t>(values), a.get(), asio::deferred);
  auto peek = gpu.peek(device_ptr<const std::uint32_t>(a.get()), std::span<std::uint32_t>(back), asio::deferred);
  bool done = false;
  std::move(poke)([&](boost::system::error_code error, std::size_t) {
    BOOST_TEST(!error);
    std::move(peek)([&](boost::system::error_code error, std::size_t bytes) {
      BOOST_TEST(!error);
      BOOST_TEST(bytes == count * 4);
      done = true;
    });
  });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }));
  BOOST_TEST(same_bytes(back, values));
}

BOOST_AUTO_TEST_CASE(as_tuple_delivers_errors_as_values) {
  auto a = gpu.allocate<std::uint32_t>(16);
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto [error] = co_await gpu.memset(a.get(), 16, std::uint32_t{3}, asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!error);
    auto [error2, moved] = co_await gpu.copy(device_ptr<const std::uint32_t>(a.get()), a.get() + 8, 8,
                                             asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!error2);
    BOOST_TEST(moved == 32u);
    finished = true;
  }, asio::detached);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return finished; }));
  BOOST_TEST(peek_list_array(16, a.get())[15] == 3u);
}

BOOST_AUTO_TEST_CASE(device_memory_passed_as_a_host_span_is_refused_before_anything_runs) {
  const auto values = random_vector<std::uint32_t>(64, 411);
  auto device = gpu.allocate<std::uint32_t>(64);
  auto other = gpu.allocate<std::uint32_t>(64);
  poke_array(values.size(), values.data(), other.get());
  auto* as_host = reinterpret_cast<std::uint32_t*>(device.get().get());
  int calls = 0;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.poke(std::span<const std::uint32_t>(as_host, 64), other.get(), [&](auto...) { ++calls; }); },
      {"engine::poke: source", "is device memory, not host memory"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        gpu.peek(device_ptr<const std::uint32_t>(other.get()), std::span<std::uint32_t>(as_host, 64),
                 [&](auto...) { ++calls; });
      },
      {"engine::peek: destination", "is device memory, not host memory"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(peek_list_array(64, other.get()) == values);  // untouched
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_from_the_initiating_function_before_anything_is_enqueued) {
  auto a = gpu.allocate<std::uint32_t>(16);
  std::vector<std::uint32_t> host(32);
  int calls = 0;
  BOOST_CHECK_THROW(gpu.poke(std::span<const std::uint32_t>(host), a.get(), [&](auto...) { ++calls; }),
                    std::invalid_argument);
  BOOST_CHECK_THROW(gpu.copy(device_ptr<const std::uint32_t>(a.get()), a.get() + 4, 8, [&](auto...) { ++calls; }),
                    std::invalid_argument);
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
}

// peek(source, count, token) makes the vector it hands back only after the source range is checked.
BOOST_AUTO_TEST_CASE(an_owned_vector_peek_checks_its_count_before_it_allocates_the_vector) {
  auto a = gpu.allocate<std::uint64_t>(16);
  int calls = 0;
  auto handler = [&](boost::system::error_code, std::vector<std::uint64_t>) { ++calls; };
  const std::size_t overflowing = SIZE_MAX / 4;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.peek(device_ptr<const std::uint64_t>(a.get()), overflowing, handler); },
      {"engine::peek: count of " + std::to_string(overflowing) + " elements of 8 bytes overflows"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.peek(device_ptr<const std::uint64_t>(a.get()), std::size_t{1} << 40, handler); },
      {"engine::peek: source range", "bytes past the end of its allocation"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
}

// Both sides page-locked: the driver copies the region on the stream (cuMemcpy2DAsync host to host).
BOOST_AUTO_TEST_CASE(copy_2d_copies_between_two_page_locked_host_arrays) {
  constexpr std::size_t region_width = 37, region_height = 11, source_pitch = 64, destination_pitch = 50;
  auto source = malloc_host_foreign_ptr<std::uint16_t>(alloc_flags::none, source_pitch * 16);
  auto destination = malloc_host_foreign_ptr<std::uint16_t>(alloc_flags::none, destination_pitch * 16);
  const auto values = random_vector<std::uint16_t>(source_pitch * 16, 130);
  std::copy(values.begin(), values.end(), source.get().get());
  ferry::testing::poison_fill(std::span(destination.get().get(), destination_pitch * 16));
  std::vector<std::uint16_t> expected(destination.get().get(), destination.get().get() + destination_pitch * 16);
  for (std::size_t row = 0; row < region_height; ++row) {
    for (std::size_t column = 0; column < region_width; ++column) {
      expected[(3 + row) * destination_pitch + 2 + column] = values[(1 + row) * source_pitch + 5 + column];
    }
  }
  stream s = stream::create();
  ferry::testing::outcome result;
  gpu.copy_2d(
      pitched_view(host_ptr<const std::uint16_t>(source.get().get()), source_pitch, region_width, region_height, 5, 1),
      pitched_view(destination.get(), destination_pitch, region_width, region_height, 2, 3), s,
      ferry::testing::record(result));
  BOOST_REQUIRE(ferry::testing::run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(!result.error);
  BOOST_TEST(result.bytes == region_width * region_height * 2);
  BOOST_TEST(same_bytes(std::vector<std::uint16_t>(destination.get().get(), destination.get().get() + destination_pitch * 16),
                        expected));
}

BOOST_AUTO_TEST_SUITE_END()
