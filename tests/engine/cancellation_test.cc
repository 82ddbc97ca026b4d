// Per-operation cancellation against a gated stream: before submission nothing is submitted; in flight
// the op completes with operation_aborted only once the GPU is done; after completion it has no effect.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;
using ferry::testing::same_bytes;

namespace {

using engine_fixture = ferry::testing::engine_fixture<64 << 10, 1>;

// Host-to-device copies the sim has been asked to enqueue so far (0 on a GPU).
std::size_t copies_enqueued() { return ferry::testing::on_sim() ? sim::call_counts()["cuMemcpyHtoDAsync"] : 0; }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cancellation, engine_fixture)

BOOST_AUTO_TEST_CASE(cancel_before_submission_submits_nothing_and_completes_at_once) {
  const std::size_t count = (64 << 10) / 4;
  auto values = random_vector<std::uint32_t>(count, 301);
  auto poison = std::vector<std::uint32_t>(count, 0xA5A5A5A5u);
  auto held_destination = gpu.allocate<std::uint32_t>(count);
  auto cancelled_destination = gpu.allocate<std::uint32_t>(count);
  poke_array(count, poison.data(), cancelled_destination.get());
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  // The first staged poke takes the only staging chunk and sits behind the gate; the second (on a pool
  // stream) waits for a chunk, so it has nothing on any stream yet.
  outcome first, second;
  gpu.poke(std::span<const std::uint32_t>(values), held_destination.get(), {s, transfer_plan::staged},
           record(first));
  asio::cancellation_signal signal;
  gpu.poke(std::span<const std::uint32_t>(values), cancelled_destination.get(), transfer_plan::staged,
           asio::bind_cancellation_slot(signal.slot(), record(second)));
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return second.calls == 1; }, std::chrono::seconds(5)));
  BOOST_TEST(second.error == asio::error::operation_aborted);
  BOOST_TEST(second.bytes == 0u);
  BOOST_TEST(first.calls == 0);
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return first.calls == 1; }));
  BOOST_TEST(!first.error);
  BOOST_TEST(same_bytes(peek_list_array(count, cancelled_destination.get()), poison));  // untouched
  BOOST_TEST(same_bytes(peek_list_array(count, held_destination.get()), values));
}

BOOST_AUTO_TEST_CASE(cancel_in_flight_completes_only_after_the_gpu_is_done) {
  const std::size_t count = 1 << 18;
  auto values = random_vector<std::uint32_t>(count, 302);
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(values.begin(), values.end(), pinned.data());
  auto destination = gpu.allocate<std::uint32_t>(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  outcome result;
  asio::cancellation_signal signal;
  gpu.poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), count), destination.get(), s,
           asio::bind_cancellation_slot(signal.slot(), record(result)));
  signal.emit(asio::cancellation_type::terminal);
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(200));
  BOOST_TEST(result.calls == 0);  // the GPU still owns the caller's memory
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(result.error == asio::error::operation_aborted);
  BOOST_TEST(same_bytes(peek_list_array(count, destination.get()), values));  // work on the stream ran
}

BOOST_AUTO_TEST_CASE(cancel_of_a_staged_transfer_stops_between_chunks_and_reports_bytes_moved) {
  const std::size_t chunk_words = (64 << 10) / 4;
  const std::size_t count = chunk_words * 6;
  auto values = random_vector<std::uint32_t>(count, 303);
  auto poison = std::vector<std::uint32_t>(count, 0xA5A5A5A5u);
  auto destination = gpu.allocate<std::uint32_t>(count);
  poke_array(count, poison.data(), destination.get());
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  outcome result;
  asio::cancellation_signal signal;
  const std::size_t copies_before = copies_enqueued();
  gpu.poke(std::span<const std::uint32_t>(values), destination.get(), {s, transfer_plan::staged},
           asio::bind_cancellation_slot(signal.slot(), record(result)));
  // Chunk 0 is on the stream, chunk 1 waits for the only staging chunk. On the sim the copy's call is
  // seen; on a GPU, a while is long enough.
  if (ferry::testing::on_sim()) {
    BOOST_TEST(ferry::testing::run_until(io, [&] { return copies_enqueued() > copies_before; }));
  } else {
    ferry::testing::run_for_a_while(io, std::chrono::milliseconds(50));
  }
  signal.emit(asio::cancellation_type::partial);
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(50));
  BOOST_TEST(result.calls == 0);
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(result.error == asio::error::operation_aborted);
  BOOST_TEST(result.bytes == chunk_words * 4);
  auto back = peek_list_array(count, destination.get());
  BOOST_CHECK(std::equal(values.begin(), values.begin() + chunk_words, back.begin()));
  BOOST_CHECK(std::equal(poison.begin() + chunk_words, poison.end(), back.begin() + chunk_words));
}

BOOST_AUTO_TEST_CASE(cancel_after_completion_has_no_effect) {
  auto destination = gpu.allocate<std::uint32_t>(1024);
  outcome result;
  asio::cancellation_signal signal;
  gpu.memset(destination.get(), 1024, std::uint32_t{77}, asio::bind_cancellation_slot(signal.slot(), [&](auto error) {
               ++result.calls;
               result.error = error;
             }));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return result.calls == 1; }));
  signal.emit(asio::cancellation_type::terminal);
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(result.calls == 1);
  BOOST_TEST(!result.error);
  BOOST_TEST(peek_list_array(1024, destination.get())[1023] == 77u);
}

BOOST_AUTO_TEST_CASE(total_cancellation_is_not_supported_and_is_ignored) {
  const std::size_t count = 1 << 16;
  auto destination = gpu.allocate<std::uint32_t>(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  int calls = 0;
  boost::system::error_code seen;
  asio::cancellation_signal signal;
  gpu.memset(destination.get(), count, std::uint32_t{5}, s, asio::bind_cancellation_slot(signal.slot(), [&](auto error) {
               ++calls;
               seen = error;
             }));
  signal.emit(asio::cancellation_type::total);
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return calls == 1; }));
  BOOST_TEST(!seen);
}

BOOST_AUTO_TEST_SUITE_END()
