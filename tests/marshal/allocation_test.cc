// Host, device and managed allocation; registration; pointer queries.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

BOOST_FIXTURE_TEST_SUITE(allocation, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(malloc_host_array_gives_page_locked_memory_freed_by_free_host) {
  for (alloc_flags flags : {alloc_flags::none, alloc_flags::portable, alloc_flags::device_mapped,
                            alloc_flags::write_combined, alloc_flags::portable | alloc_flags::device_mapped}) {
    host_ptr<std::uint32_t> p = malloc_host_array<std::uint32_t>(flags, 4099);
    auto values = random_vector<std::uint32_t>(4099, 21);
    std::copy(values.begin(), values.end(), p.get());
    device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(4099);
    stream s = stream::create();
    poke_array_async(4099, host_ptr<const std::uint32_t>(p), device.get(), s);
    s.synchronize();
    auto back = peek_list_array(4099, device.get());
    BOOST_CHECK_MESSAGE(back == values, "flags " << to_string(flags));
    free_host(p);
  }
}

BOOST_AUTO_TEST_CASE(malloc_host_foreign_ptr_frees_itself_and_moves_without_double_free) {
  pinned_buffer<std::uint64_t> a = malloc_host_foreign_ptr<std::uint64_t>(alloc_flags::portable, 100);
  pinned_buffer<std::uint64_t> b = malloc_host_foreign_ptr<std::uint64_t>(alloc_flags::none, 200);
  b = std::move(a);  // frees b's 200, takes a's 100
  BOOST_TEST(b.size() == 100u);
  BOOST_TEST(!a);
  host_ptr<std::uint64_t> raw = b.release();
  BOOST_TEST(!b);
  free_host(raw);
}

BOOST_AUTO_TEST_CASE(double_free_host_is_rejected) {
  host_ptr<std::uint8_t> p = malloc_host_array<std::uint8_t>(alloc_flags::none, 64);
  free_host(p);
  expect_error<std::invalid_argument>([&] { free_host(p); },
                                      {"free_host: pointer", "is not page-locked memory from malloc_host_array"});
}

BOOST_AUTO_TEST_CASE(register_array_page_locks_pageable_memory_until_unregistered) {
  const std::size_t count = 1 << 16;
  // Page-aligned, as registration of whole pages is what the driver does best.
  std::unique_ptr<std::uint32_t, decltype(&std::free)> memory(
      static_cast<std::uint32_t*>(std::aligned_alloc(4096, count * sizeof(std::uint32_t))), &std::free);
  auto values = random_vector<std::uint32_t>(count, 22);
  std::copy(values.begin(), values.end(), memory.get());
  host_ptr<std::uint32_t> registered = register_array(register_flags::portable, count, memory.get());
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(count);
  stream s = stream::create();
  poke_array_async(count, host_ptr<const std::uint32_t>(registered), device.get(), s);
  s.synchronize();
  BOOST_TEST(peek_list_array(count, device.get()) == values);
  BOOST_TEST(unregister_array(registered) == memory.get());
}

BOOST_AUTO_TEST_CASE(host_registration_unregisters_on_destruction) {
  std::vector<std::uint64_t> memory = random_vector<std::uint64_t>(10000, 23);
  {
    auto registration = host_registration<std::uint64_t>::register_range(std::span(memory), register_flags::device_map);
    BOOST_TEST(registration.size() == memory.size());
  }
  // Registering again only works when the first registration is gone.
  host_ptr<std::uint64_t> again = register_array(register_flags::none, memory.size(), memory.data());
  unregister_array(again);
}

BOOST_AUTO_TEST_CASE(unregister_of_memory_that_is_not_registered_is_rejected) {
  std::vector<std::uint32_t> memory(1024);
  expect_error<std::invalid_argument>([&] { unregister_array(host_ptr<std::uint32_t>(memory.data())); },
                                      {"unregister_array: pointer", "is not the start of a registered range"});
}

BOOST_AUTO_TEST_CASE(registering_twice_is_rejected) {
  std::vector<std::uint32_t> memory(1024);
  host_ptr<std::uint32_t> first = register_array(register_flags::none, memory.size(), memory.data());
  expect_error<std::invalid_argument>([&] { register_array(register_flags::none, memory.size(), memory.data()); },
                                      {"register_array: range", "already registered"});
  unregister_array(first);
}

BOOST_AUTO_TEST_CASE(flags_a_call_does_not_accept_are_rejected) {
  expect_error<std::invalid_argument>([] { malloc_host_array<int>(static_cast<alloc_flags>(0x40), 4); },
                                      {"malloc_host_array: flags 0x40 hold bits alloc_flags does not define"});
  std::vector<int> memory(16);
  expect_error<std::invalid_argument>(
      [&] { register_array(static_cast<register_flags>(0x100), memory.size(), memory.data()); },
      {"register_array: flags 0x100 hold bits register_flags does not define"});
  expect_error<std::invalid_argument>([] { malloc_managed_array<int>(attach_flag::single, 4); },
                                      {"malloc_managed_array: attach flag single is not accepted here"});
  host_ptr<int> mapped = malloc_host_array<int>(alloc_flags::device_mapped, 4);
  expect_error<std::invalid_argument>([&] { get_device_ptr(alloc_flags::device_mapped, mapped); },
                                      {"get_device_ptr: flags must be alloc_flags::none", "got device_mapped"});
  free_host(mapped);
}

BOOST_AUTO_TEST_CASE(zero_element_allocations_are_rejected) {
  expect_error<std::invalid_argument>([] { malloc_array<int>(0); }, {"malloc_array: count is 0"});
  expect_error<std::invalid_argument>([] { malloc_host_array<int>(alloc_flags::none, 0); },
                                      {"malloc_host_array: count is 0"});
}

BOOST_AUTO_TEST_CASE(malloc_array_and_free_pair_up_and_double_free_is_rejected) {
  device_ptr<float> p = malloc_array<float>(1000);
  auto values = random_vector<float>(1000, 24);
  poke_array(1000, values.data(), p);
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(1000, p), values));
  free(p);
  expect_error<std::invalid_argument>([&] { free(p); }, {"free: pointer", "is not a live device allocation"});
}

BOOST_AUTO_TEST_CASE(free_of_an_interior_pointer_is_rejected) {
  device_buffer<float> buffer = device_buffer<float>::allocate(100);
  expect_error<std::invalid_argument>([&] { free(buffer.get() + 10); },
                                      {"free: pointer", "points inside the allocation that starts at"});
}

BOOST_AUTO_TEST_CASE(alloca_array_frees_after_the_action) {
  auto values = random_vector<std::int64_t>(333, 25);
  auto back = alloca_array<std::int64_t>(333, [&](device_ptr<std::int64_t> p) {
    poke_array(333, values.data(), p);
    return peek_list_array(333, p);
  });
  BOOST_TEST(back == values);
}

BOOST_AUTO_TEST_CASE(device_buffer_move_assignment_frees_what_it_held) {
  device_buffer<int> a = device_buffer<int>::allocate(10);
  device_buffer<int> b = device_buffer<int>::allocate(20);
  const CUdeviceptr held_by_a = a.get().get();
  b = std::move(a);
  BOOST_TEST(b.get().get() == held_by_a);
  BOOST_TEST(b.size() == 10u);
}

BOOST_AUTO_TEST_CASE(managed_memory_is_visible_to_host_and_device) {
  for (attach_flag flag : {attach_flag::global, attach_flag::host}) {
    device_ptr<std::uint32_t> managed = malloc_managed_array<std::uint32_t>(flag, 5000);
    auto values = random_vector<std::uint32_t>(5000, 26);
    poke_array(5000, values.data(), managed);
    // The host reads managed memory directly once the device is idle.
    BOOST_CHECK(std::equal(values.begin(), values.end(), reinterpret_cast<const std::uint32_t*>(managed.get())));
    device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(5000);
    copy_array(5000, device_ptr<const std::uint32_t>(managed), device.get());
    BOOST_TEST(peek_list_array(5000, device.get()) == values);
    free(managed);
  }
}

BOOST_AUTO_TEST_CASE(get_base_ptr_finds_the_allocation_of_an_interior_pointer) {
  device_buffer<std::uint16_t> buffer = device_buffer<std::uint16_t>::allocate(4096);
  auto [base, size] = get_base_ptr(buffer.get() + 1234);
  BOOST_TEST(base.get() == buffer.get().get());
  BOOST_TEST(size >= static_cast<std::int64_t>(4096 * sizeof(std::uint16_t)));
  device_ptr<std::uint16_t> gone = malloc_array<std::uint16_t>(8);
  free(gone);
  expect_error<std::invalid_argument>([&] { get_base_ptr(gone); },
                                      {"get_base_ptr: pointer", "is not inside a live device allocation"});
}

BOOST_AUTO_TEST_CASE(get_device_ptr_of_mapped_memory_is_readable_by_device_copies) {
  const std::size_t count = 10007;
  pinned_buffer<std::uint32_t> mapped = pinned_buffer<std::uint32_t>::allocate(count, alloc_flags::device_mapped);
  auto values = random_vector<std::uint32_t>(count, 27);
  std::copy(values.begin(), values.end(), mapped.data());
  device_ptr<std::uint32_t> view = get_device_ptr(alloc_flags::none, mapped.get());
  BOOST_TEST(static_cast<bool>(view));
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(count);
  copy_array(count, device_ptr<const std::uint32_t>(view), device.get());
  BOOST_TEST(peek_list_array(count, device.get()) == values);
}

BOOST_AUTO_TEST_CASE(get_device_ptr_on_memory_that_is_not_mapped_is_rejected) {
  pinned_buffer<std::uint32_t> unmapped = pinned_buffer<std::uint32_t>::allocate(16, alloc_flags::none);
  std::vector<std::uint32_t> pageable(16);
  expect_error<std::invalid_argument>([&] { get_device_ptr(alloc_flags::none, host_ptr<std::uint32_t>(pageable.data())); },
                                      {"get_device_ptr: pointer", "is not mapped into the device's address space"});
  (void)unmapped;
}

BOOST_AUTO_TEST_CASE(get_mem_info_reports_free_below_total_and_sees_allocations) {
  mem_info before = get_mem_info();
  BOOST_TEST(before.free > 0);
  BOOST_TEST(before.free <= before.total);
  const std::size_t bytes = std::size_t{64} << 20;
  device_buffer<std::byte> big = device_buffer<std::byte>::allocate(bytes);
  mem_info during = get_mem_info();
  BOOST_TEST(during.total == before.total);
  BOOST_TEST(during.free <= before.free - static_cast<std::int64_t>(bytes));
}

BOOST_AUTO_TEST_CASE(out_of_memory_is_an_out_of_memory_error) {
  const std::size_t too_much = device::get(0).total_memory() * 2;
  expect_error<ferry::out_of_memory>([&] { malloc_array<std::byte>(too_much); },
                                     {"cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY", "malloc_array of"});
}

BOOST_AUTO_TEST_SUITE_END()
