// ferry::remote with device memory, two processes on one GPU: device to device (cuda_ipc) and host to
// device (cuda_copy). The sim's device memory is not host-addressable, so UCX cannot move it there: on
// the sim backend these cases are skipped (failure_test pins the refusal).
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <stdexcept>

#include "ferry/buffers.hpp"
#include "ferry/marshal.hpp"
#include "ferry/remote.hpp"
#include "tests/remote/peer_process.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"

using boost::system::error_code;
using ferry::remote::memory_kind;
using ferry::testing::check_same;
using ferry::testing::connected_peer;
using ferry::testing::expect_error;
using ferry::testing::peer_bytes;
using ferry::testing::random_bytes;
using ferry::testing::run_until;

namespace {

auto only_on_cuda() {
  return boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result result(!ferry::testing::on_sim());
    result.message() << "needs the cuda backend (UCX cannot reach the sim's device memory)";
    return result;
  });
}

// Both processes' transports: CUDA IPC and copies beside TCP for the wire-up (FERRY_REMOTE_TLS wins).
void choose_cuda_transports() { setenv("FERRY_REMOTE_TLS", "cuda_ipc,cuda_copy,tcp,sm,self", 0); }

std::vector<std::byte> read_device(ferry::device_ptr<std::byte> from, std::size_t bytes) {
  std::vector<std::byte> host(bytes);
  ferry::peek_array(bytes, ferry::device_ptr<const std::byte>(from), host.data());
  return host;
}

// Puts `data` (from `local`) into the peer's device memory at [offset, +size), reads it back into
// `back`, and checks every byte, and the peer's bytes around it.
void put_then_get(connected_peer& pair, ferry::remote::local_bytes local, ferry::remote::local_bytes back,
                  std::size_t offset) {
  bool put = false, got = false;
  pair.endpoint.async_put(local, pair.memory.window(offset, local.size), [&](error_code error, std::size_t bytes) {
    BOOST_REQUIRE_MESSAGE(!error, "put: " << error.message());
    BOOST_TEST(bytes == local.size);
    put = true;
  });
  run_until(pair.io, [&] { return put; });
  pair.endpoint.async_get(back, pair.memory.window(offset, back.size), [&](error_code error, std::size_t bytes) {
    BOOST_REQUIRE_MESSAGE(!error, "get: " << error.message());
    BOOST_TEST(bytes == back.size);
    got = true;
  });
  run_until(pair.io, [&] { return got; });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(remote_device_memory)

BOOST_FIXTURE_TEST_CASE(device_to_device_put_and_get_between_two_processes, ferry::testing::device_fixture,
                        *only_on_cuda()) {
  choose_cuda_transports();
  connected_peer pair(41, peer_bytes, memory_kind::device);
  BOOST_TEST((pair.memory.kind() == memory_kind::device));
  auto data = random_bytes(peer_bytes / 2, 4101);
  auto source = ferry::device_buffer<std::byte>::allocate(data.size());
  auto destination = ferry::device_buffer<std::byte>::allocate(data.size());
  ferry::poke_array(data.size(), data.data(), source.get());
  put_then_get(pair, ferry::remote::local_bytes(source.get(), data.size()),
               ferry::remote::local_bytes(destination.get(), data.size()), 4096);
  check_same(read_device(destination.get(), data.size()), data, "device -> peer's device -> device");
}

BOOST_FIXTURE_TEST_CASE(host_to_device_put_and_get_between_two_processes, ferry::testing::device_fixture,
                        *only_on_cuda()) {
  choose_cuda_transports();
  connected_peer pair(42, peer_bytes, memory_kind::device);
  auto data = random_bytes(peer_bytes / 4, 4201);
  std::vector<std::byte> back(data.size());
  put_then_get(pair, ferry::remote::local_bytes(std::span<std::byte>(data)), ferry::remote::local_bytes(std::span(back)),
               65536);
  check_same(back, data, "host -> peer's device -> host");
  // The peer's memory before the window is as the peer filled it.
  std::vector<std::byte> before(65536);
  bool got = false;
  pair.endpoint.async_get(std::span(before), pair.memory.window(0, 65536), [&](error_code error, std::size_t) {
    BOOST_REQUIRE(!error);
    got = true;
  });
  run_until(pair.io, [&] { return got; });
  const auto filled = random_bytes(peer_bytes, 42);
  check_same(before, std::span(filled).first(65536), "the peer's untouched bytes");
}

BOOST_FIXTURE_TEST_CASE(device_memory_needs_a_cuda_transport, ferry::testing::device_fixture, *only_on_cuda()) {
  boost::asio::io_context io;
  ferry::remote::worker worker(io.get_executor(), ferry::remote::worker_options{"tcp,sm,self"});
  auto memory = ferry::device_buffer<std::byte>::allocate(4096);
  expect_error<std::invalid_argument>([&] { (void)worker.register_memory(memory.get(), 4096); },
                                      {"register_memory", "device memory", "\"tcp,sm,self\"", "cuda_copy or cuda_ipc"});
}

BOOST_AUTO_TEST_SUITE_END()
