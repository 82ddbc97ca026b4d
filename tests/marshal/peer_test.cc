// Peer copies: between two contexts on one device always; between two devices where two are present
// (the sim presents two by default, FERRY_SIM_DEVICES; on the GPU machine they need two GPUs).
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/peer_access.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::devices_are_peers;
using ferry::testing::disable_from;
using ferry::testing::enable_from;
using ferry::testing::expect_error;
using ferry::testing::peer_access_both_ways;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t count = (1 << 20) + 3;

enum class copy_call { sync, async };

// Device memory in `owner` holding `values` (or poison where `values` is empty).
device_ptr<std::uint32_t> allocate_in(context_ref owner, const std::vector<std::uint32_t>& values) {
  context_guard in_owner(owner);
  device_ptr<std::uint32_t> memory = malloc_array<std::uint32_t>(count);
  auto content = values.empty() ? std::vector<std::uint32_t>(count, 0xA5A5A5A5u) : values;
  poke_array(count, content.data(), memory);
  // A synchronous copy from pageable memory may return before its DMA lands (docs/engine.md, "Mixing
  // synchronous Marshal calls with the engine"), and a peer copy issued from the other context is not
  // ordered after it: the poison landed on a copy's result under compute-sanitizer on two H200s.
  owner.synchronize();
  return memory;
}

std::vector<std::uint32_t> read_back(context_ref owner, device_ptr<std::uint32_t> memory) {
  context_guard in_owner(owner);
  return peek_list_array(count, memory);
}

void release(context_ref owner, device_ptr<std::uint32_t> memory) {
  context_guard in_owner(owner);
  free(memory);
}

// Allocates in `owner`, fills with random values, copies to `other` with copy_array_peer (or its async
// form on a stream of `owner`), and checks every byte read back from `other`.
void check_peer_copy(context_ref owner, context_ref other, copy_call call, std::uint64_t seed) {
  auto values = random_vector<std::uint32_t>(count, seed);
  device_ptr<std::uint32_t> source = allocate_in(owner, values);
  device_ptr<std::uint32_t> destination = allocate_in(other, {});
  if (call == copy_call::async) {
    context_guard in_owner(owner);
    stream s = stream::create();
    copy_array_peer_async(count, device_ptr<const std::uint32_t>(source), owner, destination, other, s);
    s.synchronize();
  } else {
    copy_array_peer(count, device_ptr<const std::uint32_t>(source), owner, destination, other);
  }
  BOOST_TEST(same_bytes(read_back(other, destination), values));
  release(other, destination);
  release(owner, source);
}

// Copies a -> b and b -> a at the same time, on a stream of each context, and checks both results.
void check_copies_both_ways_at_once(context_ref a, context_ref b, std::uint64_t seed) {
  auto from_a = random_vector<std::uint32_t>(count, seed);
  auto from_b = random_vector<std::uint32_t>(count, seed + 1);
  device_ptr<std::uint32_t> a_source = allocate_in(a, from_a), a_destination = allocate_in(a, {});
  device_ptr<std::uint32_t> b_source = allocate_in(b, from_b), b_destination = allocate_in(b, {});
  {
    // Each copy is enqueued with its stream's context current.
    context_guard in_b(b);
    stream on_b = stream::create();
    copy_array_peer_async(count, device_ptr<const std::uint32_t>(b_source), b, a_destination, a, on_b);
    {
      context_guard in_a(a);
      stream on_a = stream::create();
      copy_array_peer_async(count, device_ptr<const std::uint32_t>(a_source), a, b_destination, b, on_a);
      on_a.synchronize();
    }
    on_b.synchronize();
  }
  BOOST_TEST(same_bytes(read_back(b, b_destination), from_a));
  BOOST_TEST(same_bytes(read_back(a, a_destination), from_b));
  for (auto [owner, memory] : {std::pair{a, a_source}, {a, a_destination}, {b, b_source}, {b, b_destination}}) {
    release(owner, memory);
  }
}

// Every copy between `a` and `b`: each direction, sync and async, then both directions at once.
void check_every_copy_between(context_ref a, context_ref b, std::uint64_t seed) {
  check_peer_copy(a, b, copy_call::sync, seed);
  check_peer_copy(a, b, copy_call::async, seed + 1);
  check_peer_copy(b, a, copy_call::sync, seed + 2);
  check_peer_copy(b, a, copy_call::async, seed + 3);
  check_copies_both_ways_at_once(a, b, seed + 4);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(peer, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(peer_copies_between_two_contexts_on_one_device_move_every_byte) {
  context second = context::create(device::get(0));
  check_peer_copy(primary, second, copy_call::sync, 41);
  check_peer_copy(second, primary, copy_call::async, 42);
  BOOST_TEST((enable_peer_access(second) == peer_access::same_device));
  BOOST_TEST(!can_access_peer(device::get(0), device::get(0)));
}

BOOST_AUTO_TEST_CASE(peer_access_is_enabled_once_and_already_enabled_poisons_no_later_call,
                     *ferry::testing::only_with_two_devices()) {
  context other = context::primary(device::get(1));
  BOOST_TEST_MESSAGE("devices 0 and 1 are " << (devices_are_peers() ? "" : "not ") << "peers");
  if (!devices_are_peers()) {
    // Without a peer link the driver refuses, and says so with the peer context's handle.
    expect_error<cuda_error>([&] { enable_from(primary, other); }, {"cuCtxEnablePeerAccess", "peer context"});
    return;
  }
  {
    peer_access_both_ways enabled(primary, other);
    BOOST_TEST((enable_from(primary, other) == peer_access::already_enabled));
    BOOST_TEST((enable_from(other, primary) == peer_access::already_enabled));
    // The "already enabled" status is not sticky: every later call in both contexts succeeds.
    for (context_ref each : {context_ref(primary), context_ref(other)}) each.synchronize();
    check_every_copy_between(primary, other, 50);
  }
  // Disabled means not enabled: disabling twice is the driver's "not enabled" error, and enabling works again.
  expect_error<cuda_error>([&] { disable_from(primary, other); }, {"cuCtxDisablePeerAccess"});
  peer_access_both_ways again(primary, other);
}

BOOST_AUTO_TEST_CASE(peer_copies_between_two_devices_with_peer_access_move_every_byte,
                     *ferry::testing::only_with_two_devices()) {
  context other = context::primary(device::get(1));
  if (!devices_are_peers()) {
    BOOST_TEST_MESSAGE("devices 0 and 1 are not peers: only the copies through the host are tested");
    return;
  }
  peer_access_both_ways enabled(primary, other);
  check_every_copy_between(primary, other, 60);
}

// Without peer access the driver stages each copy through host memory; the bytes must be the same.
BOOST_AUTO_TEST_CASE(peer_copies_between_two_devices_without_peer_access_go_through_the_host,
                     *ferry::testing::only_with_two_devices()) {
  context other = context::primary(device::get(1));
  check_every_copy_between(primary, other, 70);
}

BOOST_AUTO_TEST_CASE(peer_copies_check_their_arguments) {
  context second = context::create(device::get(0));
  device_buffer<std::uint32_t> small = device_buffer<std::uint32_t>::allocate(10);
  device_buffer<std::uint32_t> large = device_buffer<std::uint32_t>::allocate(100);
  expect_error<std::invalid_argument>(
      [&] { copy_array_peer(11, device_ptr<const std::uint32_t>(small.get()), primary, large.get(), second); },
      {"copy_array_peer: source range", "runs 4 bytes past the end"});
  expect_error<std::invalid_argument>(
      [&] {
        copy_array_peer(10, device_ptr<const std::uint32_t>(large.get()), context_ref(static_cast<CUcontext>(nullptr)),
                        small.get(), second);
      },
      {"copy_array_peer: source_context is a null context"});
}

BOOST_AUTO_TEST_SUITE_END()
