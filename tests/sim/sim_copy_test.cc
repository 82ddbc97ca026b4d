// The sim's copies and fills: byte-exact on random data, bytes around the target left alone, and every
// bad range refused before anything is queued.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <span>
#include <vector>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

BOOST_AUTO_TEST_SUITE(sim_copies)

BOOST_AUTO_TEST_CASE(synchronous_copies_move_every_byte_and_nothing_else) {
  sim_context fixture;
  constexpr std::size_t guard = 512;
  constexpr std::size_t size = 100'003;
  const CUdeviceptr a = device_alloc(size + 2 * guard);
  const CUdeviceptr b = device_alloc(size + 2 * guard);
  BOOST_REQUIRE(sim().cuMemsetD8(a, static_cast<unsigned char>(poison), size + 2 * guard) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuMemsetD8(b, static_cast<unsigned char>(poison), size + 2 * guard) == CUDA_SUCCESS);
  const std::vector<std::byte> data = random_bytes(size, 1);

  BOOST_TEST(sim().cuMemcpyHtoD(a + guard, data.data(), size) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoD(b + guard, a + guard, size) == CUDA_SUCCESS);
  std::vector<std::byte> expected = poisoned_bytes(size + 2 * guard);
  std::memcpy(expected.data() + guard, data.data(), size);
  BOOST_TEST(same_bytes(read_back(a, size + 2 * guard), expected));
  BOOST_TEST(same_bytes(read_back(b, size + 2 * guard), expected));
  std::vector<std::byte> out = poisoned_bytes(size);
  BOOST_TEST(sim().cuMemcpyDtoH(out.data(), b + guard, size) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(out, data));
  BOOST_TEST(sim().cuMemFree(a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(b) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(async_copies_round_trip_random_bytes_in_stream_order) {
  sim_context fixture;
  constexpr std::size_t size = 1 << 20;
  const CUdeviceptr a = device_alloc(size);
  const CUdeviceptr b = device_alloc(size);
  const std::vector<std::byte> data = random_bytes(size, 2);
  std::vector<std::byte> out = poisoned_bytes(size);
  CUstream stream = stream_create();
  BOOST_TEST(sim().cuMemcpyHtoDAsync(a, data.data(), size, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoDAsync(b, a, size, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoHAsync(out.data(), b, size, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(out, data));
  // The legacy and per-thread streams take async copies too.
  std::vector<std::byte> again = poisoned_bytes(size);
  BOOST_TEST(sim().cuMemcpyDtoHAsync(again.data(), a, size, nullptr) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(again, data));
  poison_fill(std::span(again));
  BOOST_TEST(sim().cuMemcpyDtoHAsync(again.data(), a, size, CU_STREAM_PER_THREAD) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(CU_STREAM_PER_THREAD) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(again, data));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(b) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(copies_refuse_ranges_outside_one_allocation_and_null_host_pointers) {
  sim_context fixture;
  const CUdeviceptr a = device_alloc(1000);
  const CUdeviceptr b = device_alloc(1000);
  std::vector<std::byte> host(2000);
  CUstream stream = stream_create();
  BOOST_TEST(sim().cuMemcpyHtoD(a + 1, host.data(), 1000) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyHtoD(a, nullptr, 10) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoH(host.data(), a + 999, 2) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoH(nullptr, a, 2) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoD(b, a, 1001) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoD(0xdead0000, a, 8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(host.data()), host.data(), 8) ==
             CUDA_ERROR_INVALID_VALUE);  // pageable host memory is not device memory
  BOOST_TEST(sim().cuMemcpyHtoD(a, reinterpret_cast<void*>(b), 8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyHtoDAsync(a, host.data(), 1001, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoHAsync(host.data(), b + 1000, 1, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyDtoDAsync(a, b, 1000, reinterpret_cast<CUstream>(host.data())) ==
             CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuMemFree(b) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoDAsync(a, b, 8, stream) == CUDA_ERROR_INVALID_VALUE);  // freed
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_SUCCESS);  // nothing was queued
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(a) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(mapped_host_memory_serves_as_device_memory_for_copies_and_fills) {
  sim_context fixture;
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
  std::vector<std::byte> registered = poisoned_bytes(8192);
  BOOST_REQUIRE(sim().cuMemHostRegister(registered.data(), registered.size(), CU_MEMHOSTREGISTER_DEVICEMAP) ==
                CUDA_SUCCESS);
  CUdeviceptr pinned_device = 0;
  CUdeviceptr registered_device = 0;
  BOOST_REQUIRE(sim().cuMemHostGetDevicePointer(&pinned_device, pinned, 0) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuMemHostGetDevicePointer(&registered_device, registered.data(), 0) == CUDA_SUCCESS);
  const CUdeviceptr device = device_alloc(4096);
  const std::vector<std::byte> data = random_bytes(4096, 3);
  BOOST_TEST(sim().cuMemcpyHtoD(device, data.data(), 4096) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoD(pinned_device, device, 4096) == CUDA_SUCCESS);
  BOOST_TEST(std::memcmp(pinned, data.data(), 4096) == 0);
  BOOST_TEST(sim().cuMemsetD32(registered_device + 4096, 0x01020304u, 1024) == CUDA_SUCCESS);
  const std::uint32_t word = 0x01020304u;
  for (std::size_t i = 4096; i < 8192; i += 4) BOOST_REQUIRE(std::memcmp(&registered[i], &word, 4) == 0);
  BOOST_TEST(sim().cuMemcpyDtoD(registered_device + 1, pinned_device, 4096) == CUDA_SUCCESS);
  BOOST_TEST((registered[0] == poison));
  BOOST_TEST(std::memcmp(registered.data() + 1, data.data(), 4096) == 0);
  BOOST_TEST(sim().cuMemcpyDtoD(registered_device + 4097, pinned_device, 4096) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemHostUnregister(registered.data()) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

// Rows of `width` bytes at (x, y) of a pitched buffer.
std::vector<std::byte> expected_rectangle(std::vector<std::byte> image, const std::vector<std::byte>& rows,
                                          std::size_t pitch, std::size_t x, std::size_t y, std::size_t width,
                                          std::size_t height, std::size_t rows_pitch, std::size_t rows_x,
                                          std::size_t rows_y) {
  for (std::size_t r = 0; r < height; ++r) {
    std::memcpy(image.data() + (y + r) * pitch + x, rows.data() + (rows_y + r) * rows_pitch + rows_x, width);
  }
  return image;
}

BOOST_AUTO_TEST_CASE(two_d_copies_move_the_rectangle_at_its_offsets_and_leave_the_pitch_padding_alone) {
  sim_context fixture;
  constexpr std::size_t width = 37, height = 11;
  constexpr std::size_t host_pitch = 50, device_pitch = 64;
  const std::vector<std::byte> host = random_bytes(host_pitch * 16, 4);
  const CUdeviceptr device = device_alloc(device_pitch * 16);
  BOOST_REQUIRE(sim().cuMemsetD8(device, static_cast<unsigned char>(poison), device_pitch * 16) == CUDA_SUCCESS);

  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = host.data();
  up.srcPitch = host_pitch;
  up.srcXInBytes = 3;
  up.srcY = 2;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = device;
  up.dstPitch = device_pitch;
  up.dstXInBytes = 5;
  up.dstY = 4;
  up.WidthInBytes = width;
  up.Height = height;
  BOOST_TEST(sim().cuMemcpy2D(&up) == CUDA_SUCCESS);
  const auto expected_device =
      expected_rectangle(poisoned_bytes(device_pitch * 16), host, device_pitch, 5, 4, width, height, host_pitch, 3, 2);
  BOOST_TEST(same_bytes(read_back(device, device_pitch * 16), expected_device));

  std::vector<std::byte> out = poisoned_bytes(host_pitch * 16);
  CUDA_MEMCPY2D down{};
  down.srcMemoryType = CU_MEMORYTYPE_UNIFIED;  // a device address, told apart by UVA
  down.srcDevice = device;
  down.srcPitch = device_pitch;
  down.srcXInBytes = 5;
  down.srcY = 4;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = out.data();
  down.dstPitch = host_pitch;
  down.dstXInBytes = 1;
  down.WidthInBytes = width;
  down.Height = height;
  CUstream stream = stream_create();
  BOOST_TEST(sim().cuMemcpy2DAsync(&down, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  const auto expected_host =
      expected_rectangle(poisoned_bytes(host_pitch * 16), host, host_pitch, 1, 0, width, height, host_pitch, 3, 2);
  BOOST_TEST(same_bytes(out, expected_host));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(two_d_copies_refuse_widths_past_the_pitch_arrays_and_rectangles_past_the_allocation) {
  sim_context fixture;
  const CUdeviceptr device = device_alloc(64 * 8);
  std::vector<std::byte> host(64 * 8);
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = host.data();
  copy.srcPitch = 64;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = device;
  copy.dstPitch = 64;
  copy.WidthInBytes = 64;
  copy.Height = 8;
  BOOST_TEST(sim().cuMemcpy2D(&copy) == CUDA_SUCCESS);
  copy.WidthInBytes = 65;
  BOOST_TEST(sim().cuMemcpy2D(&copy) == CUDA_ERROR_INVALID_VALUE);
  copy.WidthInBytes = 64;
  copy.dstY = 1;  // the last row would end past the allocation
  BOOST_TEST(sim().cuMemcpy2D(&copy) == CUDA_ERROR_INVALID_VALUE);
  copy.dstY = 0;
  copy.dstXInBytes = 1;
  BOOST_TEST(sim().cuMemcpy2DAsync(&copy, nullptr) == CUDA_ERROR_INVALID_VALUE);
  copy.dstXInBytes = 0;
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  BOOST_TEST(sim().cuMemcpy2D(&copy) == CUDA_ERROR_INVALID_VALUE);
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcHost = nullptr;
  BOOST_TEST(sim().cuMemcpy2D(&copy) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpy2D(nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(peer_copies_move_bytes_between_the_contexts_of_two_devices) {
  sim_context fixture;
  CUcontext other = nullptr;
  BOOST_REQUIRE(sim().cuDevicePrimaryCtxRetain(&other, 1) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxPushCurrent(other) == CUDA_SUCCESS);
  const CUdeviceptr remote = device_alloc(70'000);
  BOOST_REQUIRE(sim().cuCtxPopCurrent(nullptr) == CUDA_SUCCESS);
  const CUdeviceptr local = device_alloc(70'000);
  const std::vector<std::byte> data = random_bytes(70'000, 5);
  BOOST_REQUIRE(sim().cuMemcpyHtoD(local, data.data(), data.size()) == CUDA_SUCCESS);

  BOOST_TEST(sim().cuMemcpyPeer(remote, other, local, fixture.ctx, 70'000) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(read_back(remote, 70'000), data));
  BOOST_REQUIRE(sim().cuMemsetD8(local, 0, 70'000) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  BOOST_TEST(sim().cuMemcpyPeerAsync(local + 1, fixture.ctx, remote, other, 69'999, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  std::vector<std::byte> expected(70'000);
  std::memcpy(expected.data() + 1, data.data(), 69'999);
  BOOST_TEST(same_bytes(read_back(local, 70'000), expected));

  BOOST_TEST(sim().cuMemcpyPeer(remote, fixture.ctx, local, fixture.ctx, 8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyPeer(remote, other, local, other, 8) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyPeer(remote, other, local, fixture.ctx, 70'001) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyPeer(remote, nullptr, local, fixture.ctx, 8) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(local) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);  // frees `remote` with it
}

BOOST_AUTO_TEST_CASE(a_batch_runs_every_copy_and_validates_as_the_driver_does) {
  sim_context fixture;
  const CUdeviceptr device = device_alloc(4096);
  std::vector<std::byte> source = random_bytes(3000, 6);
  // Page-locked: a batch that writes pageable memory returns only once it has run (the next case).
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 1000, 0) == CUDA_SUCCESS);
  const std::span destination(static_cast<std::byte*>(pinned), 1000);
  std::ranges::copy(poisoned_bytes(1000), destination.begin());
  BOOST_REQUIRE(sim().cuMemsetD8(device, static_cast<unsigned char>(poison), 4096) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  auto address = [](const void* p) { return reinterpret_cast<CUdeviceptr>(p); };
  // host -> device, device -> device, device -> host, and one of nothing.
  CUdeviceptr dsts[] = {device, device + 2048, address(destination.data()), device};
  CUdeviceptr srcs[] = {address(source.data()), device + 100, device + 500, device};
  std::size_t sizes[] = {2000, 1000, 1000, 0};
  CUmemcpyAttributes attributes[2] = {};
  attributes[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attributes[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
  std::size_t indices[] = {0, 1};

  {
    // Held back, so that the batch is validated before the copy ahead of it has run.
    ferry::sim::gate hold(stream);
    BOOST_TEST(sim().cuMemcpyHtoDAsync(device, source.data(), 2000, stream) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 4, attributes, indices, 2, stream) == CUDA_SUCCESS);
  }
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  std::vector<std::byte> expected = poisoned_bytes(4096);
  std::memcpy(expected.data(), source.data(), 2000);
  std::memcpy(expected.data() + 2048, source.data() + 100, 1000);
  BOOST_TEST(same_bytes(read_back(device, 4096), expected));
  BOOST_TEST(same_bytes(destination, std::span(source).subspan(500, 1000)));

  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 0, attributes, indices, 1, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attributes, indices, 2, nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attributes, indices, 2, CU_STREAM_LEGACY) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attributes, indices, 0, stream) == CUDA_ERROR_INVALID_VALUE);
  std::size_t bad_indices[] = {1, 2};
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attributes, bad_indices, 2, stream) ==
             CUDA_ERROR_INVALID_VALUE);
  CUmemcpyAttributes no_order{};
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &no_order, indices, 1, stream) == CUDA_ERROR_INVALID_VALUE);
  std::size_t too_big[] = {2000, 2049, 1000};  // the second would end past the device allocation
  BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, too_big, 3, attributes, indices, 2, stream) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
}

// As the driver's copies to pageable memory: the call returns once the batch has run, so behind a held
// stream it waits for the stream.
BOOST_AUTO_TEST_CASE(a_batch_that_writes_pageable_memory_returns_once_it_has_run) {
  sim_context fixture;
  const CUdeviceptr device = device_alloc(2048);
  const std::vector<std::byte> values = random_bytes(2048, 8);
  BOOST_REQUIRE(sim().cuMemcpyHtoD(device, values.data(), 2048) == CUDA_SUCCESS);
  std::vector<std::byte> destination = poisoned_bytes(1500);
  CUstream stream = stream_create();
  CUdeviceptr dsts[] = {reinterpret_cast<CUdeviceptr>(destination.data())};
  CUdeviceptr srcs[] = {device + 300};
  std::size_t sizes[] = {1500};
  CUmemcpyAttributes attributes{};
  attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  std::size_t indices[] = {0};
  std::future<CUresult> call;  // before the gate: on the way out the gate opens before the call is waited for
  auto hold = std::make_unique<ferry::sim::gate>(stream);
  call = std::async(std::launch::async, [&] {
    if (CUresult made = sim().cuCtxSetCurrent(fixture.ctx); made != CUDA_SUCCESS) return made;
    return sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &attributes, indices, 1, stream);
  });
  BOOST_TEST((call.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout));
  hold.reset();  // opens the stream
  BOOST_TEST(call.get() == CUDA_SUCCESS);
  // Done when the call returned: no synchronization before the check.
  BOOST_TEST(same_bytes(destination, std::span(values).subspan(300, 1500)));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_batch_reads_during_api_call_sources_before_returning) {
  sim_context fixture;
  const CUdeviceptr device = device_alloc(256);
  CUstream stream = stream_create();
  std::vector<std::byte> source = random_bytes(256, 7);
  const std::vector<std::byte> original = source;
  CUdeviceptr dsts[] = {device};
  CUdeviceptr srcs[] = {reinterpret_cast<CUdeviceptr>(source.data())};
  std::size_t sizes[] = {256};
  CUmemcpyAttributes attributes{};
  attributes.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  std::size_t indices[] = {0};
  {
    ferry::sim::gate hold(stream);
    BOOST_TEST(sim().cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &attributes, indices, 1, stream) == CUDA_SUCCESS);
    poison_fill(std::span(source));
  }
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(read_back(device, 256), original));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

template <class T>
void check_fill(CUresult (*fill)(CUdeviceptr, T, std::size_t), T value) {
  constexpr std::size_t count = 1001, offset = 16, total = 8192;
  const CUdeviceptr device = device_alloc(total);
  BOOST_REQUIRE(sim().cuMemsetD8(device, static_cast<unsigned char>(poison), total) == CUDA_SUCCESS);
  BOOST_TEST(fill(device + offset, value, count) == CUDA_SUCCESS);
  std::vector<std::byte> expected = poisoned_bytes(total);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(expected.data() + offset + i * sizeof(T), &value, sizeof(T));
  BOOST_TEST(same_bytes(read_back(device, total), expected));
  BOOST_TEST(fill(device + total - sizeof(T), value, 2) == CUDA_ERROR_INVALID_VALUE);
  if constexpr (sizeof(T) > 1) BOOST_TEST(fill(device + 1, value, 1) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(memsets_fill_exactly_their_elements_and_need_aligned_in_range_destinations) {
  sim_context fixture;
  check_fill<unsigned char>(sim().cuMemsetD8, 0x3c);
  check_fill<unsigned short>(sim().cuMemsetD16, 0xbeef);
  check_fill<unsigned int>(sim().cuMemsetD32, 0xdeadbeefu);
  CUstream stream = stream_create();
  const CUdeviceptr device = device_alloc(64);
  BOOST_TEST(sim().cuMemsetD8Async(device, 1, 64, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemsetD16Async(device + 2, 0x0202, 31, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemsetD32Async(device + 4, 0x03030303u, 14, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemsetD32Async(device + 2, 0, 1, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemsetD16Async(device + 1, 0, 1, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemsetD8Async(device, 0, 65, stream) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  std::vector<std::byte> expected(64, std::byte{1});
  std::fill(expected.begin() + 2, expected.end(), std::byte{2});
  std::fill(expected.begin() + 4, expected.begin() + 60, std::byte{3});
  BOOST_TEST(same_bytes(read_back(device, 64), expected));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_throttled_64_mib_copy_at_1_gb_per_second_takes_at_least_60_ms) {
  sim_context fixture;
  constexpr std::size_t size = 64 << 20;
  const CUdeviceptr device = device_alloc(size);
  std::vector<std::byte> host(size);
  CUstream stream = stream_create();
  ferry::sim::set_copy_bandwidth(1e9);
  const auto start = std::chrono::steady_clock::now();
  BOOST_TEST(sim().cuMemcpyHtoDAsync(device, host.data(), size, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(took).count() >= 60);
  ferry::sim::set_copy_bandwidth(0);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ferry::testing
