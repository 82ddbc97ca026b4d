// Peer copies: between two contexts on one device always; between two devices where two are present.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t count = (1 << 20) + 3;

// Allocates in `owner`, fills with random values, copies to `other` with copy_array_peer (or its async
// form), and reads back from `other`.
void check_peer_copy(context_ref owner, context_ref other, bool asynchronous, std::uint64_t seed) {
  auto values = random_vector<std::uint32_t>(count, seed);
  device_ptr<std::uint32_t> source;
  device_ptr<std::uint32_t> destination;
  {
    context_guard in_owner(owner);
    source = malloc_array<std::uint32_t>(count);
    poke_array(count, values.data(), source);
  }
  {
    context_guard in_other(other);
    destination = malloc_array<std::uint32_t>(count);
    auto poison = std::vector<std::uint32_t>(count, 0xA5A5A5A5u);
    poke_array(count, poison.data(), destination);
  }
  if (asynchronous) {
    context_guard in_owner(owner);
    stream s = stream::create();
    copy_array_peer_async(count, device_ptr<const std::uint32_t>(source), owner, destination, other, s);
    s.synchronize();
  } else {
    copy_array_peer(count, device_ptr<const std::uint32_t>(source), owner, destination, other);
  }
  {
    context_guard in_other(other);
    BOOST_CHECK(peek_list_array(count, destination) == values);
    free(destination);
  }
  context_guard in_owner(owner);
  free(source);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(peer, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(peer_copies_between_two_contexts_on_one_device_move_every_byte) {
  context second = context::create(device::get(0));
  check_peer_copy(primary, second, false, 41);
  check_peer_copy(second, primary, true, 42);
  BOOST_TEST((enable_peer_access(second) == peer_access::same_device));
  BOOST_TEST(!can_access_peer(device::get(0), device::get(0)));
}

BOOST_AUTO_TEST_CASE(peer_copies_between_two_devices_with_and_without_peer_access,
                     *ferry::testing::only_with_two_devices()) {
  context other = context::primary(device::get(1));
  check_peer_copy(primary, other, false, 43);
  if (can_access_peer(device::get(0), device::get(1))) {
    BOOST_TEST((enable_peer_access(other) == peer_access::enabled));
    BOOST_TEST((enable_peer_access(other) == peer_access::already_enabled));
    check_peer_copy(primary, other, true, 44);  // the "already enabled" status poisoned nothing
    disable_peer_access(other);
  }
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
