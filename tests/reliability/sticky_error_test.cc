// A sticky error (sim) while 1,000 operations are pending on four gated streams, of every kind the
// engine has (pinned, staged and owned pokes and peeks, copies, memsets, 2-D copies): all of them
// complete with it, exactly once; later submits of each kind fail fast with it; destroying the engine
// afterwards is quick and leaves nothing behind.
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using boost::system::error_code;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t op_count = 1000;
constexpr std::size_t streams_used = 4;
constexpr std::size_t slot = 4096;  // elements of each op's own slice of the buffers

struct sticky_fixture : ferry::testing::device_fixture {
  sticky_fixture() {
    options.on_failure = [this](const std::string&) {
      std::lock_guard lock(mutex);
      ++failures_reported;
    };
    options.staging_chunk_bytes = 64 << 10;  // staged ops span several chunks and queue for them
    options.staging_chunks = 4;
    gpu = std::make_unique<engine>(io.get_executor(), options);
  }
  ~sticky_fixture() {
    gpu.reset();
    sim::reset_faults();
  }
  asio::io_context io;
  engine_options options;
  std::mutex mutex;
  std::size_t failures_reported = 0;
  std::unique_ptr<engine> gpu;
};

// Counts completions by their error, and completions of the same op twice.
struct tally {
  std::size_t completed = 0, with_sticky = 0, other = 0, twice = 0;
  std::vector<bool> seen = std::vector<bool>(op_count + 64, false);
  std::string first_other;
  std::function<void(error_code)> record(std::size_t op) {
    return [this, op](error_code error) {
      if (seen[op]) ++twice;
      seen[op] = true;
      ++completed;
      if (error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS)) {
        ++with_sticky;
      } else {
        if (first_other.empty()) first_other = "op " + std::to_string(op) + ": " + error.message();
        ++other;
      }
    };
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(sticky_error, sticky_fixture, *ferry::testing::only_on_sim())

BOOST_AUTO_TEST_CASE(a_sticky_error_with_a_thousand_ops_pending_on_four_streams_reaches_every_one) {
  const std::size_t elements = op_count * slot;
  auto device = gpu->allocate<std::uint32_t>(elements);
  auto other_device = gpu->allocate<std::uint32_t>(elements);
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(elements);
  std::vector<std::uint32_t> pageable = random_vector<std::uint32_t>(elements, 9101);
  std::copy(pageable.begin(), pageable.end(), pinned.data());
  std::array<stream, streams_used> streams{stream::create(), stream::create(), stream::create(), stream::create()};
  std::vector<std::unique_ptr<ferry::testing::stream_gate>> gates;
  for (const stream& s : streams) gates.push_back(std::make_unique<ferry::testing::stream_gate>(s));

  tally ops;
  for (std::size_t i = 0; i < op_count; ++i) {
    const stream_ref on = streams[i % streams_used];
    const std::size_t at = i * slot;
    auto done = ops.record(i);
    auto bytes_done = [done](error_code error, std::size_t) { done(error); };
    const device_ptr<std::uint32_t> dst = device.get() + at;
    const device_ptr<const std::uint32_t> src(dst);
    switch (i % 8) {
      case 0: gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.data() + at), slot), dst, on, bytes_done); break;
      case 1: gpu->poke(std::span<const std::uint32_t>(pageable).subspan(at, slot), dst, on, bytes_done); break;
      case 2: gpu->peek(src, pinned_span(host_ptr<std::uint32_t>(pinned.data() + at), slot), on, bytes_done); break;
      case 3: gpu->peek(src, std::span<std::uint32_t>(pageable).subspan(at, slot), on, bytes_done); break;
      case 4: gpu->copy(src, other_device.get() + at, slot, on, bytes_done); break;
      case 5: gpu->memset(dst, slot, std::uint32_t(i), on, done); break;
      case 6:
        gpu->copy_2d(pitched_view(src, 256, 64, 16, 3, 0), pitched_view(other_device.get() + at, 128, 64, 16, 5, 1), on, bytes_done);
        break;
      default:
        gpu->poke(random_vector<std::uint32_t>(slot, i), dst, on,
                  [done](error_code error, std::vector<std::uint32_t>) { done(error); });
    }
  }
  // Nothing has run: every stream is held at its gate.
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(ops.completed == 0u);

  sim::fail_stream(streams[0].get(), CUDA_ERROR_ILLEGAL_ADDRESS);
  gates[0]->open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return ops.completed >= op_count / streams_used; },
                                       std::chrono::seconds(20)));
  for (auto& gate : gates) gate->open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return ops.completed == op_count; }, std::chrono::seconds(20)));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(50));  // a second completion would show now
  BOOST_TEST(ops.completed == op_count);
  BOOST_TEST(ops.with_sticky == op_count, ops.other << " completed otherwise, first: " << ops.first_other);
  BOOST_TEST(ops.twice == 0u);
  BOOST_TEST(gpu->sticky_error() == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
  {
    std::lock_guard lock(mutex);
    BOOST_TEST(failures_reported >= op_count);
  }

  // Later submits of each kind fail fast: at once, with no GPU work to wait for.
  tally later;
  const auto submitted = std::chrono::steady_clock::now();
  const stream_ref on = streams[1];
  auto later_bytes = [&](std::size_t i) {
    return [done = later.record(i)](error_code error, std::size_t) { done(error); };
  };
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.data()), slot), device.get(), later_bytes(0));
  gpu->poke(std::span<const std::uint32_t>(pageable).first(slot * 64), device.get(), on, later_bytes(1));
  gpu->peek(device_ptr<const std::uint32_t>(device.get()), std::span<std::uint32_t>(pageable).first(slot), later_bytes(2));
  gpu->copy(device_ptr<const std::uint32_t>(device.get()), other_device.get(), slot, later_bytes(3));
  gpu->memset(device.get(), slot, std::uint32_t{7}, on, later.record(4));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return later.completed == 5u; }, std::chrono::seconds(5)));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  BOOST_TEST(later.with_sticky == 5u, later.first_other);
  BOOST_TEST(seconds < 1.0);

  // Destroying the engine afterwards is clean: quick, every handler already ran, nothing held
  // (device_fixture checks the sim's allocations, streams and events once the test ends).
  const auto destroying = std::chrono::steady_clock::now();
  gpu.reset();
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - destroying).count() < 5.0);
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(ops.completed == op_count);
  BOOST_TEST(later.completed == 5u);
  gates.clear();
  sim::reset_faults();  // the context lives again: the buffers and streams free normally
}

BOOST_AUTO_TEST_SUITE_END()
