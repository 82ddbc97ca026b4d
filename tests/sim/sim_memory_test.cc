// The sim's memory: device allocations, pinned and registered host memory, managed memory, pointer
// attributes, and the usage bookkeeping.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

BOOST_AUTO_TEST_SUITE(sim_memory)

BOOST_AUTO_TEST_CASE(device_allocations_are_aligned_distinct_and_counted_against_device_memory) {
  sim_context fixture;
  std::size_t free_before = 0;
  std::size_t total = 0;
  BOOST_TEST(sim().cuMemGetInfo(&free_before, &total) == CUDA_SUCCESS);
  BOOST_TEST(total == ferry::sim::default_device_memory);
  CUdeviceptr a = device_alloc(1000);
  CUdeviceptr b = device_alloc(3);
  BOOST_TEST(a % 256 == 0u);
  BOOST_TEST(b % 256 == 0u);
  BOOST_TEST(a != b);
  std::size_t free_after = 0;
  BOOST_TEST(sim().cuMemGetInfo(&free_after, &total) == CUDA_SUCCESS);
  BOOST_TEST(free_before - free_after == 1003u);
  BOOST_TEST(sim().cuMemFree(a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(b) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemGetInfo(&free_after, &total) == CUDA_SUCCESS);
  BOOST_TEST(free_after == free_before);
}

BOOST_AUTO_TEST_CASE(cu_mem_alloc_refuses_zero_bytes_and_more_than_the_device_has) {
  sim_context fixture;
  CUdeviceptr p = 0;
  BOOST_TEST(sim().cuMemAlloc(&p, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemAlloc(&p, ferry::sim::default_device_memory + 1) == CUDA_ERROR_OUT_OF_MEMORY);
  BOOST_TEST(sim().cuMemAlloc(nullptr, 16) == CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(cu_mem_free_accepts_only_the_base_of_a_live_allocation) {
  sim_context fixture;
  CUdeviceptr p = device_alloc(4096);
  BOOST_TEST(sim().cuMemFree(p + 256) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(0x1234) == CUDA_ERROR_INVALID_VALUE);
  int on_stack = 0;
  BOOST_TEST(sim().cuMemFree(reinterpret_cast<CUdeviceptr>(&on_stack)) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(p) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(p) == CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(freed_device_ranges_are_reused_first_fit) {
  sim_context fixture;
  CUdeviceptr first = device_alloc(1 << 16);
  CUdeviceptr second = device_alloc(1 << 16);
  BOOST_REQUIRE(sim().cuMemFree(first) == CUDA_SUCCESS);
  CUdeviceptr again = device_alloc(1 << 12);
  BOOST_TEST(again == first);
  BOOST_TEST(sim().cuMemFree(again) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(second) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(cu_mem_get_address_range_finds_device_and_managed_allocations_from_any_interior_pointer) {
  sim_context fixture;
  CUdeviceptr device = device_alloc(5000);
  CUdeviceptr managed = 0;
  BOOST_REQUIRE(sim().cuMemAllocManaged(&managed, 300, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  CUdeviceptr base = 0;
  std::size_t size = 0;
  BOOST_TEST(sim().cuMemGetAddressRange(&base, &size, device + 4999) == CUDA_SUCCESS);
  BOOST_TEST(base == device);
  BOOST_TEST(size == 5000u);
  BOOST_TEST(sim().cuMemGetAddressRange(&base, &size, managed + 10) == CUDA_SUCCESS);
  BOOST_TEST(base == managed);
  BOOST_TEST(size == 300u);
  BOOST_TEST(sim().cuMemGetAddressRange(&base, &size, device + 5000) == CUDA_ERROR_NOT_FOUND);
  int host = 0;
  BOOST_TEST(sim().cuMemGetAddressRange(&base, &size, reinterpret_cast<CUdeviceptr>(&host)) == CUDA_ERROR_NOT_FOUND);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(pinned_memory_is_page_aligned_host_memory_and_only_known_flags_are_accepted) {
  sim_context fixture;
  void* p = nullptr;
  BOOST_TEST(sim().cuMemHostAlloc(&p, 100, 0x8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostAlloc(&p, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostAlloc(&p, 100, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                               CU_MEMHOSTALLOC_WRITECOMBINED) == CUDA_SUCCESS);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0u);
  static_cast<unsigned char*>(p)[99] = 7;  // real host memory
  BOOST_TEST(sim().cuMemFreeHost(static_cast<char*>(p) + 1) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFreeHost(p) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(p) == CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(registered_ranges_may_not_overlap_and_unregister_takes_the_exact_base) {
  sim_context fixture;
  std::vector<std::byte> host(3 * 4096);
  std::byte* base = host.data();
  BOOST_TEST(sim().cuMemHostRegister(base, 4096, 0x10) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostRegister(nullptr, 4096, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostRegister(base, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostRegister(base + 4096, 4096, CU_MEMHOSTREGISTER_READ_ONLY) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemHostRegister(base + 4096, 4096, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  BOOST_TEST(sim().cuMemHostRegister(base, 4097, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  BOOST_TEST(sim().cuMemHostRegister(base + 8191, 10, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  BOOST_TEST(sim().cuMemHostRegister(base, 4096, CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS);  // adjacent
  BOOST_TEST(sim().cuMemHostUnregister(base + 4097) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  BOOST_TEST(sim().cuMemHostUnregister(base + 8192) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  BOOST_TEST(sim().cuMemHostUnregister(base + 4096) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemHostUnregister(base + 4096) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  BOOST_TEST(sim().cuMemHostUnregister(base) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(mapped_host_memory_has_a_device_pointer_equal_to_its_host_address) {
  sim_context fixture;
  void* mapped = nullptr;
  void* unmapped = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&mapped, 8192, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuMemHostAlloc(&unmapped, 8192, 0) == CUDA_SUCCESS);
  std::vector<std::byte> host(4096);
  BOOST_REQUIRE(sim().cuMemHostRegister(host.data(), host.size(), CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, mapped, 0) == CUDA_SUCCESS);
  BOOST_TEST(d == reinterpret_cast<CUdeviceptr>(mapped));
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, static_cast<char*>(mapped) + 100, 0) == CUDA_SUCCESS);
  BOOST_TEST(d == reinterpret_cast<CUdeviceptr>(mapped) + 100);
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, host.data() + 8, 0) == CUDA_SUCCESS);
  BOOST_TEST(d == reinterpret_cast<CUdeviceptr>(host.data() + 8));
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, mapped, 1) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, unmapped, 0) == CUDA_ERROR_INVALID_VALUE);
  int stack = 0;
  BOOST_TEST(sim().cuMemHostGetDevicePointer(&d, &stack, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostUnregister(host.data()) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(mapped) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(unmapped) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(managed_memory_is_host_memory_that_prefetch_advise_and_attach_validate) {
  sim_context fixture;
  CUdeviceptr managed = 0;
  BOOST_TEST(sim().cuMemAllocManaged(&managed, 0, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_SINGLE) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_REQUIRE(sim().cuMemAllocManaged(&managed, 1 << 16, CU_MEM_ATTACH_HOST) == CUDA_SUCCESS);
  reinterpret_cast<unsigned char*>(managed)[5] = 42;  // the host may touch it
  CUstream stream = stream_create();
  CUdeviceptr device = device_alloc(64);

  const CUmemLocation on_device{CU_MEM_LOCATION_TYPE_DEVICE, 1};
  const CUmemLocation on_host{CU_MEM_LOCATION_TYPE_HOST, 0};
  const CUmemLocation bad_device{CU_MEM_LOCATION_TYPE_DEVICE, 7};
  BOOST_TEST(sim().cuMemPrefetchAsync(managed, 1 << 16, on_device, 0, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemPrefetchAsync(managed + 100, 100, on_host, 0, nullptr) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemPrefetchAsync(managed, 1 << 16, bad_device, 0, stream) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuMemPrefetchAsync(managed, (1 << 16) + 1, on_device, 0, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemPrefetchAsync(device, 64, on_device, 0, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemPrefetchAsync(managed, 64, on_device, 1, stream) == CUDA_ERROR_INVALID_VALUE);

  BOOST_TEST(sim().cuMemAdvise(managed, 64, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, on_device) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemAdvise(managed, 64, CU_MEM_ADVISE_SET_ACCESSED_BY, bad_device) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuMemAdvise(managed, 64, static_cast<CUmem_advise>(99), on_device) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemAdvise(device, 64, CU_MEM_ADVISE_SET_READ_MOSTLY, on_host) == CUDA_ERROR_INVALID_VALUE);

  BOOST_TEST(sim().cuStreamAttachMemAsync(stream, managed, 0, CU_MEM_ATTACH_SINGLE) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamAttachMemAsync(stream, managed, 1 << 16, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamAttachMemAsync(nullptr, managed, 0, CU_MEM_ATTACH_SINGLE) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamAttachMemAsync(stream, managed, 0, 0x8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamAttachMemAsync(stream, device, 0, CU_MEM_ATTACH_HOST) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(reinterpret_cast<unsigned char*>(managed)[5] == 42);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(pointer_attributes_describe_each_kind_of_memory_and_refuse_unknown_pointers) {
  sim_context fixture;
  CUdeviceptr device = device_alloc(1024);
  CUdeviceptr managed = 0;
  BOOST_REQUIRE(sim().cuMemAllocManaged(&managed, 1024, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 1024, 0) == CUDA_SUCCESS);
  const auto pinned_address = reinterpret_cast<CUdeviceptr>(pinned);

  unsigned type = 0;
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device + 8) == CUDA_SUCCESS);
  BOOST_TEST(type == static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, managed) == CUDA_SUCCESS);
  BOOST_TEST(type == static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pinned_address) == CUDA_SUCCESS);
  BOOST_TEST(type == static_cast<unsigned>(CU_MEMORYTYPE_HOST));

  CUcontext owner = nullptr;
  BOOST_TEST(sim().cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, device) == CUDA_SUCCESS);
  BOOST_TEST(owner == fixture.ctx);
  unsigned managed_flag = 7;
  BOOST_TEST(sim().cuPointerGetAttribute(&managed_flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed) == CUDA_SUCCESS);
  BOOST_TEST(managed_flag == 1u);
  BOOST_TEST(sim().cuPointerGetAttribute(&managed_flag, CU_POINTER_ATTRIBUTE_IS_MANAGED, device) == CUDA_SUCCESS);
  BOOST_TEST(managed_flag == 0u);
  int ordinal = -1;
  BOOST_TEST(sim().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device) == CUDA_SUCCESS);
  BOOST_TEST(ordinal == 0);
  CUdeviceptr start = 0;
  std::size_t size = 0;
  BOOST_TEST(sim().cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, device + 1000) ==
             CUDA_SUCCESS);
  BOOST_TEST(start == device);
  BOOST_TEST(sim().cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, device + 1000) == CUDA_SUCCESS);
  BOOST_TEST(size == 1024u);
  CUdeviceptr device_pointer = 0;
  BOOST_TEST(sim().cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, device + 4) ==
             CUDA_SUCCESS);
  BOOST_TEST(device_pointer == device + 4);
  BOOST_TEST(sim().cuPointerGetAttribute(&device_pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, pinned_address) ==
             CUDA_ERROR_INVALID_VALUE);  // not DEVICEMAP
  void* host_pointer = nullptr;
  BOOST_TEST(sim().cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, pinned_address) ==
             CUDA_SUCCESS);
  BOOST_TEST(host_pointer == pinned);
  BOOST_TEST(sim().cuPointerGetAttribute(&host_pointer, CU_POINTER_ATTRIBUTE_HOST_POINTER, device) ==
             CUDA_ERROR_INVALID_VALUE);
  unsigned mapped = 0;
  BOOST_TEST(sim().cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, device) == CUDA_SUCCESS);
  BOOST_TEST(mapped == 1u);

  int stack = 0;
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                         reinterpret_cast<CUdeviceptr>(&stack)) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device + 1024) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(pointer_attributes_in_one_call_read_as_zero_for_unknown_pointers_as_the_driver_does) {
  sim_context fixture;
  CUdeviceptr device = device_alloc(4096);
  CUpointer_attribute asked[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
  CUdeviceptr start = 1;
  std::size_t size = 1;
  unsigned type = 1;
  void* answers[] = {&start, &size, &type};
  BOOST_TEST(sim().cuPointerGetAttributes(3, asked, answers, device + 1000) == CUDA_SUCCESS);
  BOOST_TEST(start == device);
  BOOST_TEST(size == 4096u);
  BOOST_TEST(type == static_cast<unsigned>(CU_MEMORYTYPE_DEVICE));

  // Not an error, unlike cuPointerGetAttribute: each attribute is written as zero.
  int stack = 0;
  BOOST_TEST(sim().cuPointerGetAttributes(3, asked, answers, reinterpret_cast<CUdeviceptr>(&stack)) == CUDA_SUCCESS);
  BOOST_TEST(start == 0u);
  BOOST_TEST(size == 0u);
  BOOST_TEST(type == 0u);
  BOOST_TEST(sim().cuPointerGetAttributes(0, asked, answers, device) == CUDA_ERROR_INVALID_VALUE);
  void* missing[] = {&start, nullptr, &type};
  BOOST_TEST(sim().cuPointerGetAttributes(3, asked, missing, device) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(current_usage_returns_to_where_it_started_once_everything_is_released) {
  sim_context fixture;
  const ferry::sim::usage before = ferry::sim::current_usage();
  CUdeviceptr device = device_alloc(3000);
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 5000, 0) == CUDA_SUCCESS);
  CUdeviceptr managed = 0;
  BOOST_REQUIRE(sim().cuMemAllocManaged(&managed, 100, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  std::vector<std::byte> host(4096);
  BOOST_REQUIRE(sim().cuMemHostRegister(host.data(), host.size(), 0) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  CUevent event = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&event, 0) == CUDA_SUCCESS);
  CUmodule module = nullptr;
  BOOST_REQUIRE(sim().cuModuleLoadData(&module, "image") == CUDA_SUCCESS);

  const ferry::sim::usage during = ferry::sim::current_usage();
  BOOST_TEST(during.device_allocations == before.device_allocations + 1);
  BOOST_TEST(during.device_bytes == before.device_bytes + 3000);
  BOOST_TEST(during.pinned_allocations == before.pinned_allocations + 1);
  BOOST_TEST(during.pinned_bytes == before.pinned_bytes + 5000);
  BOOST_TEST(during.managed_allocations == before.managed_allocations + 1);
  BOOST_TEST(during.registered_ranges == before.registered_ranges + 1);
  BOOST_TEST(during.streams == before.streams + 1);
  BOOST_TEST(during.events == before.events + 1);
  BOOST_TEST(during.modules == before.modules + 1);

  BOOST_TEST(sim().cuModuleUnload(module) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventDestroy(event) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemHostUnregister(host.data()) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage() == before);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ferry::testing
