// The managed-memory pair beside Marshal: prefetch (CUDA 13 locations) and stream attachment.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

BOOST_FIXTURE_TEST_SUITE(managed, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(prefetch_to_device_and_back_to_host_keeps_every_byte) {
  const std::size_t count = (4 << 20) / sizeof(std::uint32_t) + 5;
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(count);
  auto values = random_vector<std::uint32_t>(count, 51);
  std::copy(values.begin(), values.end(), managed.host_span().begin());
  stream s = stream::create();
  prefetch_array_async(managed.get(), count, memory_location::on(device::get(0)), s);
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(count);
  copy_array_async(count, device_ptr<const std::uint32_t>(managed.get()), device.get(), s);
  prefetch_array_async(managed.get(), count, memory_location::host(), s);
  s.synchronize();
  BOOST_TEST(peek_list_array(count, device.get()) == values);
  BOOST_CHECK(std::equal(values.begin(), values.end(), managed.host_span().begin()));
}

BOOST_AUTO_TEST_CASE(attach_array_async_attaches_to_a_stream_and_the_host) {
  const std::size_t count = 10000;
  managed_buffer<std::uint64_t> managed = managed_buffer<std::uint64_t>::allocate(count, attach_flag::host);
  auto values = random_vector<std::uint64_t>(count, 52);
  std::copy(values.begin(), values.end(), managed.host_span().begin());
  stream s = stream::create();
  attach_array_async(attach_flag::single, s, managed.get(), count);
  device_buffer<std::uint64_t> device = device_buffer<std::uint64_t>::allocate(count);
  copy_array_async(count, device_ptr<const std::uint64_t>(managed.get()), device.get(), s);
  attach_array_async(attach_flag::host, s, managed.get(), count);
  s.synchronize();
  BOOST_TEST(peek_list_array(count, device.get()) == values);
  BOOST_CHECK(std::equal(values.begin(), values.end(), managed.host_span().begin()));
}

BOOST_AUTO_TEST_CASE(advice_is_accepted_for_managed_memory_and_keeps_every_byte) {
  const std::size_t count = (2 << 20) / sizeof(std::uint32_t);
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(count);
  auto values = random_vector<std::uint32_t>(count, 53);
  std::copy(values.begin(), values.end(), managed.host_span().begin());
  const device gpu = device::get(0);
  advise_array(managed.get(), count, memory_advice::preferred_location, memory_location::on(gpu));
  advise_array(managed.get(), count, memory_advice::accessed_by, memory_location::on(gpu));
  advise_array(managed.get(), count, memory_advice::read_mostly, memory_location::on(gpu));
  stream s = stream::create();
  prefetch_array_async(managed.get(), count, memory_location::on(gpu), s);
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(count);
  copy_array_async(count, device_ptr<const std::uint32_t>(managed.get()), device.get(), s);
  s.synchronize();
  BOOST_TEST(peek_list_array(count, device.get()) == values);
  advise_array(managed.get(), count, memory_advice::unset_read_mostly, memory_location::on(gpu));
  advise_array(managed.get(), count, memory_advice::unset_accessed_by, memory_location::on(gpu));
  advise_array(managed.get(), count, memory_advice::unset_preferred_location, memory_location::host());
  advise_array(managed.get(), count, memory_advice::preferred_location, memory_location::host());
  BOOST_CHECK(std::equal(values.begin(), values.end(), managed.host_span().begin()));
  device_buffer<std::uint32_t> plain = device_buffer<std::uint32_t>::allocate(16);
  expect_error<std::invalid_argument>(
      [&] { advise_array(plain.get(), 16, memory_advice::read_mostly, memory_location::on(gpu)); },
      {"advise_array: pointer", "is not managed memory"});
}

BOOST_AUTO_TEST_CASE(managed_operations_refuse_memory_that_is_not_managed_and_unknown_devices) {
  device_buffer<std::uint32_t> plain = device_buffer<std::uint32_t>::allocate(100);
  stream s = stream::create();
  expect_error<std::invalid_argument>(
      [&] { prefetch_array_async(plain.get(), 100, memory_location::host(), s); },
      {"prefetch_array_async: pointer", "is not managed memory"});
  expect_error<std::invalid_argument>([&] { attach_array_async(attach_flag::global, s, plain.get(), 100); },
                                      {"attach_array_async: pointer", "is not managed memory"});
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(100);
  expect_error<std::invalid_argument>(
      [&] { prefetch_array_async(managed.get(), 101, memory_location::host(), s); },
      {"prefetch_array_async: pointer range", "runs 4 bytes past the end"});
}

BOOST_AUTO_TEST_SUITE_END()
