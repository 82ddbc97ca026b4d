// Driver failures reach the caller as the right error family, naming the call and the object (sim
// injects them; on the cuda backend the cases that need injection are skipped).
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/error.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

BOOST_FIXTURE_TEST_SUITE(driver_errors, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(cuda_category_names_statuses_as_the_driver_does) {
  std::error_code code = make_error_code(CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(code.category().name() == std::string("cuda"));
  BOOST_TEST(code.message() == "CUDA_ERROR_INVALID_VALUE (invalid argument)");
  BOOST_TEST(is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
  BOOST_TEST(!is_sticky(CUDA_ERROR_INVALID_VALUE));
}

BOOST_AUTO_TEST_CASE(a_failed_copy_throws_cuda_error_with_call_operation_and_range, *ferry::testing::only_on_sim()) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100);
  auto values = random_vector<std::uint32_t>(100, 71);
  sim::fail_call("cuMemcpyHtoD", 1, CUDA_ERROR_UNKNOWN);
  expect_error<cuda_error>([&] { poke_array(100, values.data(), device.get()); },
                           {"cuMemcpyHtoD failed with CUDA_ERROR_UNKNOWN", "poke_array: 400 bytes from",
                            "synchronously", "copy_1d.cc"});
  poke_array(100, values.data(), device.get());  // the next call succeeds
  BOOST_TEST(peek_list_array(100, device.get()) == values);
}

BOOST_AUTO_TEST_CASE(allocation_past_the_memory_budget_throws_out_of_memory_and_leaks_nothing, *ferry::testing::only_on_sim()) {
  sim::out_of_memory_after(1 << 20);
  device_buffer<std::byte> fits = device_buffer<std::byte>::allocate(1 << 19);
  expect_error<out_of_memory>([] { malloc_array<std::byte>(1 << 20); },
                              {"cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY", "malloc_array of 1048576 elements"});
  expect_error<out_of_memory>([] { malloc_host_array<std::byte>(alloc_flags::none, 1 << 20); },
                              {"cuMemHostAlloc failed with CUDA_ERROR_OUT_OF_MEMORY"});
  expect_error<out_of_memory>([] { malloc_managed_array<std::byte>(attach_flag::global, 1 << 20); },
                              {"cuMemAllocManaged failed with CUDA_ERROR_OUT_OF_MEMORY"});
}

BOOST_AUTO_TEST_CASE(a_sticky_error_on_a_stream_surfaces_as_sticky_cuda_error, *ferry::testing::only_on_sim()) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100);
  stream s = stream::create();
  sim::fail_stream(s.get(), CUDA_ERROR_ILLEGAL_ADDRESS);
  memset_async(device.get(), 100, 5u, s);
  expect_error<sticky_cuda_error>([&] { s.synchronize(); },
                                  {"cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS", "stream 0x"});
  sim::reset_faults();
}

BOOST_AUTO_TEST_SUITE_END()
