// marshal_roundtrip's cases of calls that move no data, timed per call over many calls in a run:
// allocation round trips (allocate then free) and queries; then managed prefetch to the device and back.
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bench/harness/test_data.hpp"
#include "bench/marshal_fixture.hpp"

namespace ferry::bench {
namespace {

constexpr std::size_t query_calls = 1000;
constexpr std::size_t small_words = (1 << 20) / 4;

// `calls` calls by ferry and as many by the raw driver per run; "bytes" 0: the time of one call.
template <class Ferry, class Raw>
comparison_spec per_call(std::string name, std::size_t calls, int warmups, int trials, Ferry ferry, Raw raw) {
  return {std::move(name), 0, calls, warmups, trials, repeated(calls, std::move(ferry)), repeated(calls, std::move(raw)),
          [] {}};
}

}  // namespace

// 1 MiB each, and the 64 MiB pageable source registered.
std::vector<result> allocations(marshal_fixture& f) {
  return compare_all({
      per_call("malloc_array_free_1MiB", 20, 2, 7, [](std::size_t) { free(malloc_array<std::uint32_t>(small_words)); },
               [&f](std::size_t) {
                 CUdeviceptr p = 0;
                 check(f.raw.cuMemAlloc(&p, small_words * 4), "cuMemAlloc");
                 check(f.raw.cuMemFree(p), "cuMemFree");
               }),
      per_call("malloc_host_array_free_host_1MiB", 5, 1, 5,
               [](std::size_t) { free_host(malloc_host_array<std::uint32_t>(alloc_flags::none, small_words)); },
               [&f](std::size_t) {
                 void* p = nullptr;
                 check(f.raw.cuMemHostAlloc(&p, small_words * 4, 0), "cuMemHostAlloc");
                 check(f.raw.cuMemFreeHost(p), "cuMemFreeHost");
               }),
      per_call("malloc_managed_array_free_1MiB", 20, 2, 7,
               [](std::size_t) { free(malloc_managed_array<std::uint32_t>(attach_flag::global, small_words)); },
               [&f](std::size_t) {
                 CUdeviceptr p = 0;
                 check(f.raw.cuMemAllocManaged(&p, small_words * 4, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
                 check(f.raw.cuMemFree(p), "cuMemFree");
               }),
      per_call("register_unregister_array_64MiB", 5, 1, 5,
               [&f](std::size_t) { unregister_array(register_array(register_flags::none, words, f.pageable_in.data())); },
               [&f](std::size_t) {
                 check(f.raw.cuMemHostRegister(f.pageable_in.data(), transfer_bytes, 0), "cuMemHostRegister");
                 check(f.raw.cuMemHostUnregister(f.pageable_in.data()), "cuMemHostUnregister");
               }),
  });
}

std::vector<result> queries(marshal_fixture& f) {
  const CUdeviceptr interior = f.a + 4096;
  pinned_buffer<std::uint32_t> mapped = pinned_buffer<std::uint32_t>::allocate(16, alloc_flags::device_mapped);
  return compare_all({
      per_call("get_base_ptr", query_calls, 2, 7,
               [&](std::size_t) {
                 if (get_base_ptr(device_ptr<std::uint32_t>(interior)).first.get() != f.a) throw std::runtime_error("get_base_ptr");
               },
               [&](std::size_t) {
                 CUdeviceptr base = 0;
                 std::size_t size = 0;
                 check(f.raw.cuMemGetAddressRange(&base, &size, interior), "cuMemGetAddressRange");
                 if (base != f.a) throw std::runtime_error("cuMemGetAddressRange");
               }),
      per_call("get_mem_info", query_calls, 2, 7, [](std::size_t) { (void)get_mem_info(); },
               [&](std::size_t) {
                 std::size_t free_bytes = 0, total = 0;
                 check(f.raw.cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
               }),
      per_call("get_device_ptr", query_calls, 2, 7, [&](std::size_t) { (void)get_device_ptr(alloc_flags::none, mapped.get()); },
               [&](std::size_t) {
                 CUdeviceptr p = 0;
                 check(f.raw.cuMemHostGetDevicePointer(&p, mapped.data(), 0), "cuMemHostGetDevicePointer");
               }),
  });
}

// 64 MiB to the device and back to the host per run.
std::vector<result> managed_prefetch(marshal_fixture& f) {
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(words);
  std::memcpy(managed.host_span().data(), f.source_values.data(), transfer_bytes);
  const CUdeviceptr m = managed.get().get();
  const CUmemLocation device_location = memory_location::on(f.gpu).to_driver();
  const CUmemLocation host_location = memory_location::host().to_driver();
  return compare_all({{"prefetch_array_async_roundtrip_64MiB", 2 * transfer_bytes, 1, 2, 7,
                       [&] {
                         prefetch_array_async(managed.get(), words, memory_location::on(f.gpu), f.s);
                         prefetch_array_async(managed.get(), words, memory_location::host(), f.s);
                         f.s.synchronize();
                       },
                       [&] {
                         check(f.raw.cuMemPrefetchAsync(m, transfer_bytes, device_location, 0, f.s.get()), "cuMemPrefetchAsync");
                         check(f.raw.cuMemPrefetchAsync(m, transfer_bytes, host_location, 0, f.s.get()), "cuMemPrefetchAsync");
                         f.synchronize();
                       },
                       [&] {
                         require_equal(managed.host_span().data(), f.source_values.data(), transfer_bytes,
                                       "prefetch_array_async");
                       }}});
}

}  // namespace ferry::bench
