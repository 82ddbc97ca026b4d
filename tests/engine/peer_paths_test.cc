// engine::copy_peer's paths (peer_path): one copy engine, the copy split over several streams and joined
// back into one op, and the copy kernel. Every path moves every byte of seeded random data (within the
// engine's context, between two contexts of one device, and between two devices where there are two),
// completes exactly once, is refused with a message naming the path where it cannot run, is cancellable
// until it is enqueued, and (sim) reports the failure of each driver call it makes.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/kernels/launch.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/peer_access.hpp"
#include "tests/support/peer_memory.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::outcome;
using ferry::testing::peer_copy;
using ferry::testing::record;
using ferry::testing::run_until;

namespace {

// Past peer_split_min_bytes (so that automatic splits between two devices), and not a whole number of
// the split's pieces.
constexpr std::size_t count = (1 << 20) + 5;
constexpr peer_path every_path[] = {peer_path::automatic, peer_path::copy_engine, peer_path::split, peer_path::kernel};

engine_options peer_options(std::size_t pool_streams = 4) {
  engine_options options;
  options.staging_chunk_bytes = 64 << 10;  // a staged poke of several chunks holds its stream (cancellation)
  options.staging_chunks = 1;
  options.pool_streams = pool_streams;
  options.peer_split_min_bytes = 1 << 20;
  options.peer_split_ways = 4;
  return options;
}

struct peer_fixture : ferry::testing::device_fixture {
  asio::io_context io;
  engine gpu{io.get_executor(), peer_options()};
};

// Runs one copy to its completion: exactly one, with every byte and no error.
void check_copy(asio::io_context& io, engine& gpu, peer_copy& copy, transfer_options options) {
  outcome result;
  copy.start(gpu, options, record(result));
  BOOST_TEST(result.calls == 0);  // never inside the initiating call
  BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(result.calls == 1);
  BOOST_TEST(!result.error, result.error.message());
  BOOST_TEST(result.bytes == copy.count * 4);
  BOOST_TEST(copy.landed());
}

// The access the kernel path gave the engine's context to `other`, taken back: primary contexts outlive a
// case, and the next must find them as the driver made them.
void forget_kernel_access(engine& gpu, context_ref other) {
  ferry::testing::disable_from(gpu.context(), other);
  // The kernels stay loaded in a context until it goes; the fixture unloads device 0's own.
}

std::string path_name(peer_path path) { return std::string(to_string(path)); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(peer_paths, peer_fixture)

BOOST_AUTO_TEST_CASE(every_path_moves_every_byte_within_the_engines_context) {
  std::uint64_t seed = 500;
  for (peer_path path : every_path) {
    BOOST_TEST_CONTEXT("peer_path " << path_name(path)) {
      peer_copy copy(gpu.context(), gpu.context(), ++seed, count);
      check_copy(io, gpu, copy, path);
    }
  }
  const peer_counts counts = gpu.peer_counts();
  BOOST_TEST(counts.copy_engine == 2u);  // automatic: one context is one device
  BOOST_TEST(counts.split == 1u);
  BOOST_TEST(counts.kernel == 1u);
}

BOOST_AUTO_TEST_CASE(copy_engine_and_split_move_every_byte_both_ways_between_two_contexts_of_one_device) {
  context other = context::create(device::get(0));
  std::uint64_t seed = 510;
  for (peer_path path : {peer_path::automatic, peer_path::copy_engine, peer_path::split}) {
    BOOST_TEST_CONTEXT("peer_path " << path_name(path)) {
      peer_copy out(gpu.context(), other, ++seed, count), back(other, gpu.context(), ++seed, count);
      check_copy(io, gpu, out, path);
      check_copy(io, gpu, back, path);
    }
  }
  BOOST_TEST(gpu.peer_counts().split == 2u);
}

BOOST_AUTO_TEST_CASE(a_split_smaller_than_its_pieces_and_an_empty_copy_move_what_they_hold) {
  for (std::size_t small : {std::size_t{1}, std::size_t{1029}, std::size_t{3000}}) {
    BOOST_TEST_CONTEXT(small << " values") {
      peer_copy copy(gpu.context(), gpu.context(), 520 + small, small);
      check_copy(io, gpu, copy, peer_path::split);
    }
  }
  peer_copy empty(gpu.context(), gpu.context(), 521, 1);
  outcome result;
  gpu.copy_peer(device_ptr<const std::uint32_t>(empty.source.get()), gpu.context(), empty.destination.get(),
                gpu.context(), 0, peer_path::kernel, record(result));
  BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(!result.error);
  BOOST_TEST(result.bytes == 0u);
  BOOST_TEST(empty.untouched());
}

BOOST_AUTO_TEST_CASE(automatic_takes_one_copy_engine_below_the_split_size) {
  peer_copy copy(gpu.context(), gpu.context(), 530, 1000);
  check_copy(io, gpu, copy, peer_path::automatic);
  BOOST_TEST(gpu.peer_counts().copy_engine == 1u);
  BOOST_TEST(gpu.peer_counts().split == 0u);
}

BOOST_AUTO_TEST_CASE(an_engine_whose_default_is_kernel_copies_with_the_kernel) {
  engine_options options = peer_options();
  options.peer = peer_path::kernel;
  engine kernel_engine(io.get_executor(), options);
  peer_copy copy(kernel_engine.context(), kernel_engine.context(), 531, count);
  check_copy(io, kernel_engine, copy, {});
  BOOST_TEST(kernel_engine.peer_counts().kernel == 1u);
}

BOOST_AUTO_TEST_CASE(the_kernel_path_refuses_a_second_context_of_the_engines_device_before_enqueuing) {
  context other = context::create(device::get(0));
  peer_copy copy(gpu.context(), other, 540, count);
  int calls = 0;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { copy.start(gpu, peer_path::kernel, [&](auto...) { ++calls; }); },
      {"engine::copy_peer: peer_path is kernel", "on device 0", "the destination is memory of another context of "
                                                                "that device",
       "take copy_engine or split"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(copy.untouched());
  BOOST_TEST(gpu.peer_counts().kernel == 0u);
}

BOOST_AUTO_TEST_CASE(bad_paths_and_bad_counts_are_refused_with_their_values_before_enqueuing) {
  peer_copy copy(gpu.context(), gpu.context(), 541, count);
  int calls = 0;
  auto counted = [&](auto...) { ++calls; };
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { copy.start(gpu, static_cast<peer_path>(9), counted); },
      {"engine::copy_peer: transfer_options::peer 9 is not a peer_path"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_peer(device_ptr<const std::uint32_t>(copy.source.get()), gpu.context(), copy.destination.get(),
                      gpu.context(), count + 1, peer_path::split, counted);
      },
      {"engine::copy_peer: source range", "runs 4 bytes past the end"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.copy(device_ptr<const std::uint32_t>(copy.source.get()), copy.destination.get(), count, peer_path::split,
                     counted); },
      {"engine::copy: transfer_options::peer is split; only copy_peer takes a peer_path"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(copy.untouched());
}

BOOST_AUTO_TEST_CASE(an_engine_refuses_peer_settings_it_cannot_use) {
  for (std::size_t ways : {std::size_t{0}, std::size_t{1}, std::size_t{17}}) {
    engine_options options;
    options.peer_split_ways = ways;
    ferry::testing::expect_error<std::invalid_argument>(
        [&] { engine refused(io.get_executor(), options); },
        {"engine: peer_split_ways is " + std::to_string(ways), "a split copy takes 2 to 16 streams"});
  }
  engine_options options;
  options.peer = static_cast<peer_path>(5);
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused(io.get_executor(), options); },
                                                      {"engine: peer 5 is not a peer_path"});
}

BOOST_AUTO_TEST_CASE(cancel_of_a_gated_split_or_kernel_copy_completes_only_after_the_gpu_is_done) {
  for (peer_path path : {peer_path::split, peer_path::kernel}) {
    BOOST_TEST_CONTEXT("peer_path " << path_name(path)) {
      peer_copy copy(gpu.context(), gpu.context(), 550, count);
      ferry::testing::check_cancel_after_enqueue(io, gpu, copy, path);
    }
  }
}

BOOST_AUTO_TEST_CASE(cancel_of_a_split_or_kernel_copy_queued_behind_a_gated_transfer_gives_up_without_submitting) {
  for (peer_path path : {peer_path::split, peer_path::kernel}) {
    BOOST_TEST_CONTEXT("peer_path " << path_name(path)) {
      peer_copy copy(gpu.context(), gpu.context(), 560, count);
      ferry::testing::check_cancel_before_enqueue(io, gpu, copy, path);
    }
  }
}

// Each driver call of a split copy, failing: the op completes once with that status (after the pieces
// already enqueued are done), and the next split copy of the same engine moves every byte.
BOOST_AUTO_TEST_CASE(a_split_copy_reports_the_failure_of_each_of_its_driver_calls, *ferry::testing::only_on_sim()) {
  struct fault {
    const char* entry_point;
    unsigned nth;
    CUresult status;
  };
  // One group of lanes (one pool stream), made by the first split: an event to fork, then a stream and
  // an event per lane. Then per piece past the first: wait, copy, record, wait; the first piece last.
  const fault faults[] = {
      {"cuEventCreate", 1, CUDA_ERROR_OUT_OF_MEMORY},    {"cuStreamCreate", 2, CUDA_ERROR_OUT_OF_MEMORY},
      {"cuEventCreate", 3, CUDA_ERROR_OUT_OF_MEMORY},    {"cuEventRecord", 1, CUDA_ERROR_INVALID_VALUE},
      {"cuStreamWaitEvent", 1, CUDA_ERROR_INVALID_VALUE}, {"cuMemcpyPeerAsync", 1, CUDA_ERROR_INVALID_VALUE},
      {"cuEventRecord", 2, CUDA_ERROR_INVALID_VALUE},    {"cuStreamWaitEvent", 2, CUDA_ERROR_INVALID_VALUE},
      {"cuMemcpyPeerAsync", 3, CUDA_ERROR_INVALID_VALUE}, {"cuMemcpyPeerAsync", 4, CUDA_ERROR_INVALID_VALUE},
  };
  std::uint64_t seed = 600;
  for (const fault& f : faults) {
    BOOST_TEST_CONTEXT(f.entry_point << " call " << f.nth) {
      engine split_engine(io.get_executor(), peer_options(1));
      peer_copy failed(gpu.context(), gpu.context(), ++seed, count), next(gpu.context(), gpu.context(), ++seed, count);
      sim::fail_call(f.entry_point, f.nth, f.status);
      outcome result;
      failed.start(split_engine, peer_path::split, record(result));
      BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
      ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
      BOOST_TEST(result.calls == 1);
      BOOST_TEST(result.error == make_error_code(f.status));
      BOOST_TEST(result.bytes == 0u);
      sim::reset_faults();
      check_copy(io, split_engine, next, peer_path::split);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_kernel_copy_reports_a_launch_or_load_the_driver_refuses, *ferry::testing::only_on_sim()) {
  std::uint64_t seed = 620;
  for (const char* entry_point : {"cuLaunchKernel", "cuModuleLoadData"}) {
    BOOST_TEST_CONTEXT(entry_point) {
      detail::unload_kernels();  // the module loads again: its load can fail
      peer_copy failed(gpu.context(), gpu.context(), ++seed, count), next(gpu.context(), gpu.context(), ++seed, count);
      sim::fail_call(entry_point, 1, CUDA_ERROR_INVALID_VALUE);
      outcome result;
      failed.start(gpu, peer_path::kernel, record(result));
      BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
      BOOST_TEST(result.error == make_error_code(CUDA_ERROR_INVALID_VALUE));
      BOOST_TEST(result.bytes == 0u);
      BOOST_TEST(failed.untouched());
      sim::reset_faults();
      check_copy(io, gpu, next, peer_path::kernel);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(peer_paths_between_devices, peer_fixture, *ferry::testing::only_with_two_devices())

BOOST_AUTO_TEST_CASE(every_path_moves_every_byte_both_ways_between_two_devices) {
  context other = context::primary(device::get(1));
  const bool peers = ferry::testing::devices_are_peers();
  std::uint64_t seed = 700;
  for (peer_path path : every_path) {
    BOOST_TEST_CONTEXT("peer_path " << path_name(path)) {
      peer_copy out(gpu.context(), other, ++seed, count), back(other, gpu.context(), ++seed, count);
      if (path == peer_path::kernel && !peers) {
        ferry::testing::expect_error<std::invalid_argument>([&] { out.start(gpu, path, [](auto...) {}); },
                                                            {"peer_path is kernel", "is not its peer"});
        continue;
      }
      check_copy(io, gpu, out, path);
      check_copy(io, gpu, back, path);
    }
  }
  if (peers) forget_kernel_access(gpu, other);
  const peer_counts counts = gpu.peer_counts();
  BOOST_TEST(counts.split == 4u);  // automatic splits between devices
  BOOST_TEST(counts.copy_engine == 2u);
  BOOST_TEST(counts.kernel == (peers ? 2u : 0u));
}

BOOST_AUTO_TEST_CASE(split_copies_both_ways_at_once_complete_each_exactly_once) {
  context other = context::primary(device::get(1));
  std::optional<ferry::testing::peer_access_both_ways> enabled;
  if (ferry::testing::devices_are_peers()) enabled.emplace(gpu.context(), other);
  peer_copy out(gpu.context(), other, 710, count), back(other, gpu.context(), 711, count);
  outcome out_result, back_result;
  out.start(gpu, peer_path::split, record(out_result));
  back.start(gpu, peer_path::split, record(back_result));
  BOOST_TEST(run_until(io, [&] { return out_result.calls == 1 && back_result.calls == 1; }));
  ferry::testing::run_for_a_while(io);
  for (const outcome& result : {out_result, back_result}) {
    BOOST_TEST(result.calls == 1);
    BOOST_TEST(!result.error);
    BOOST_TEST(result.bytes == count * 4);
  }
  BOOST_TEST(out.landed());
  BOOST_TEST(back.landed());
}

BOOST_AUTO_TEST_CASE(the_kernel_path_reports_a_refused_peer_query_or_access_before_enqueuing,
                     *ferry::testing::only_on_sim()) {
  context other = context::primary(device::get(1));
  for (const char* entry_point : {"cuDeviceCanAccessPeer", "cuCtxEnablePeerAccess"}) {
    BOOST_TEST_CONTEXT(entry_point) {
      peer_copy copy(gpu.context(), other, 720, count);
      sim::fail_call(entry_point, 1, CUDA_ERROR_INVALID_VALUE);
      int calls = 0;
      ferry::testing::expect_error<cuda_error>([&] { copy.start(gpu, peer_path::kernel, [&](auto...) { ++calls; }); },
                                               {entry_point, "CUDA_ERROR_INVALID_VALUE"});
      sim::reset_faults();
      ferry::testing::run_for_a_while(io);
      BOOST_TEST(calls == 0);
      BOOST_TEST(copy.untouched());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
