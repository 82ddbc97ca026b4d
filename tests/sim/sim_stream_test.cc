// The sim's streams, events, gates, host functions, stream memory operations and kernel twins.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

using namespace std::chrono_literals;

void raise_flag(void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); }

struct ordered_log {
  std::mutex mutex;
  std::vector<int> entries;
  std::vector<std::thread::id> threads;
};

struct log_entry {
  ordered_log* log;
  int value;
};

void append(void* entry) {
  auto* e = static_cast<log_entry*>(entry);
  std::lock_guard lock(e->log->mutex);
  e->log->entries.push_back(e->value);
  e->log->threads.push_back(std::this_thread::get_id());
}

BOOST_AUTO_TEST_SUITE(sim_streams)

BOOST_AUTO_TEST_CASE(cu_stream_get_ctx_names_the_context_a_stream_was_made_in) {
  sim_context fixture;
  CUstream primary_stream = nullptr;
  BOOST_REQUIRE(sim().cuStreamCreate(&primary_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUcontext created = nullptr;
  BOOST_REQUIRE(sim().cuCtxCreate(&created, nullptr, 0, 0) == CUDA_SUCCESS);  // current from here on
  CUstream created_stream = nullptr;
  BOOST_REQUIRE(sim().cuStreamCreate(&created_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  CUcontext owner = nullptr;
  BOOST_TEST(sim().cuStreamGetCtx(primary_stream, &owner) == CUDA_SUCCESS);
  BOOST_TEST(owner == fixture.ctx);
  BOOST_TEST(sim().cuStreamGetCtx(created_stream, &owner) == CUDA_SUCCESS);
  BOOST_TEST(owner == created);
  // The legacy default stream is the current context's.
  BOOST_TEST(sim().cuStreamGetCtx(CU_STREAM_LEGACY, &owner) == CUDA_SUCCESS);
  BOOST_TEST(owner == created);
  BOOST_TEST(sim().cuStreamGetCtx(created_stream, nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamDestroy(created_stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamGetCtx(created_stream, &owner) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuCtxDestroy(created) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxSetCurrent(fixture.ctx) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(primary_stream) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(cu_stream_create_takes_default_or_non_blocking_and_destroy_needs_a_live_stream) {
  sim_context fixture;
  const std::size_t streams_before = ferry::sim::current_usage().streams;
  CUstream stream = nullptr;
  BOOST_TEST(sim().cuStreamCreate(&stream, 2) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamCreate(nullptr, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamCreate(&stream, CU_STREAM_DEFAULT) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage().streams == streams_before + 1);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(ferry::sim::current_usage().streams == streams_before);
}

BOOST_AUTO_TEST_CASE(a_stream_runs_its_work_in_order_on_a_worker_thread) {
  sim_context fixture;
  CUstream stream = stream_create();
  ordered_log log;
  std::vector<log_entry> entries;
  for (int i = 0; i < 100; ++i) entries.push_back({&log, i});
  for (log_entry& e : entries) BOOST_REQUIRE(sim().cuLaunchHostFunc(stream, append, &e) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[static_cast<std::size_t>(i)] = i;
  BOOST_TEST(log.entries == expected, boost::test_tools::per_element());
  BOOST_TEST(log.threads.front() != std::this_thread::get_id());
  BOOST_TEST(sim().cuLaunchHostFunc(stream, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_gate_holds_back_later_work_until_opened) {
  sim_context fixture;
  CUstream stream = stream_create();
  std::atomic<bool> ran{false};
  CUevent event = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  ferry::sim::gate hold(stream);
  BOOST_TEST(sim().cuLaunchHostFunc(stream, raise_flag, &ran) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventRecord(event, stream) == CUDA_SUCCESS);
  std::this_thread::sleep_for(20ms);
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_ERROR_NOT_READY);
  BOOST_TEST(sim().cuEventQuery(event) == CUDA_ERROR_NOT_READY);
  BOOST_TEST(!ran.load());
  hold.open();
  BOOST_TEST(sim().cuEventSynchronize(event) == CUDA_SUCCESS);
  BOOST_TEST(ran.load());
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventDestroy(event) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(async_copies_read_the_source_when_the_stream_runs_them_not_when_queued) {
  sim_context fixture;
  CUstream stream = stream_create();
  const CUdeviceptr device = device_alloc(1024);
  std::vector<std::byte> host = random_bytes(1024, 10);
  {
    ferry::sim::gate hold(stream);
    BOOST_TEST(sim().cuMemcpyHtoDAsync(device, host.data(), host.size(), stream) == CUDA_SUCCESS);
    fill_random(std::span(host), 11);  // in place: the copy reads these bytes when it runs
  }
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(read_back(device, 1024), host));
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_destroyed_stream_still_completes_the_work_queued_on_it) {
  sim_context fixture;
  CUstream stream = stream_create();
  std::atomic<bool> ran{false};
  {
    ferry::sim::gate hold(stream);
    BOOST_TEST(sim().cuLaunchHostFunc(stream, raise_flag, &ran) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
    BOOST_TEST(!ran.load());
  }
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_SUCCESS);
  BOOST_TEST(ran.load());
}

BOOST_AUTO_TEST_CASE(cu_ctx_synchronize_waits_for_every_stream_of_the_context) {
  sim_context fixture;
  CUstream a = stream_create();
  CUstream b = stream_create(CU_STREAM_DEFAULT);
  std::atomic<bool> ran_a{false}, ran_b{false};
  auto opener = [](ferry::sim::gate* g) {
    std::this_thread::sleep_for(30ms);
    g->open();
  };
  ferry::sim::gate hold_a(a);
  ferry::sim::gate hold_b(b);
  BOOST_TEST(sim().cuLaunchHostFunc(a, raise_flag, &ran_a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuLaunchHostFunc(b, raise_flag, &ran_b) == CUDA_SUCCESS);
  std::thread open_a(opener, &hold_a);
  std::thread open_b(opener, &hold_b);
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_SUCCESS);
  BOOST_TEST(ran_a.load());
  BOOST_TEST(ran_b.load());
  open_a.join();
  open_b.join();
  BOOST_TEST(sim().cuStreamDestroy(a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(b) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(the_legacy_stream_waits_for_blocking_streams_but_not_for_non_blocking_ones) {
  sim_context fixture;
  CUstream blocking = stream_create(CU_STREAM_DEFAULT);
  CUstream non_blocking = stream_create(CU_STREAM_NON_BLOCKING);
  std::atomic<bool> legacy_ran{false};
  {
    ferry::sim::gate hold(non_blocking);
    BOOST_TEST(sim().cuLaunchHostFunc(nullptr, raise_flag, &legacy_ran) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
    BOOST_TEST(legacy_ran.load());
  }
  legacy_ran = false;
  {
    ferry::sim::gate hold(blocking);
    BOOST_TEST(sim().cuLaunchHostFunc(CU_STREAM_LEGACY, raise_flag, &legacy_ran) == CUDA_SUCCESS);
    std::this_thread::sleep_for(20ms);
    BOOST_TEST(!legacy_ran.load());
    BOOST_TEST(sim().cuStreamQuery(nullptr) == CUDA_ERROR_NOT_READY);
  }
  BOOST_TEST(sim().cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  BOOST_TEST(legacy_ran.load());
  // And work on a blocking stream waits for the legacy stream's earlier work.
  std::atomic<bool> blocking_ran{false};
  {
    ferry::sim::gate hold(nullptr);
    BOOST_TEST(sim().cuLaunchHostFunc(blocking, raise_flag, &blocking_ran) == CUDA_SUCCESS);
    std::this_thread::sleep_for(20ms);
    BOOST_TEST(!blocking_ran.load());
  }
  BOOST_TEST(sim().cuStreamSynchronize(blocking) == CUDA_SUCCESS);
  BOOST_TEST(blocking_ran.load());
  BOOST_TEST(sim().cuStreamDestroy(blocking) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(non_blocking) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(events_complete_when_their_stream_reaches_them_and_time_the_gap) {
  sim_context fixture;
  CUstream stream = stream_create();
  CUevent start = nullptr, end = nullptr, untimed = nullptr;
  BOOST_TEST(sim().cuEventCreate(&start, 0x10) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuEventCreate(&start, CU_EVENT_INTERPROCESS) == CUDA_ERROR_INVALID_VALUE);
  BOOST_REQUIRE(sim().cuEventCreate(&start, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventQuery(start) == CUDA_SUCCESS);  // recorded on nothing
  float ms = -1;
  BOOST_TEST(sim().cuEventElapsedTime(&ms, start, end) == CUDA_ERROR_INVALID_HANDLE);  // never recorded

  BOOST_TEST(sim().cuEventRecord(start, stream) == CUDA_SUCCESS);
  ferry::sim::gate hold(stream);
  BOOST_TEST(sim().cuEventRecord(end, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventRecord(untimed, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventQuery(end) == CUDA_ERROR_NOT_READY);
  BOOST_TEST(sim().cuEventSynchronize(start) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventElapsedTime(&ms, start, end) == CUDA_ERROR_NOT_READY);
  std::this_thread::sleep_for(50ms);
  hold.open();
  BOOST_TEST(sim().cuEventSynchronize(end) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventElapsedTime(&ms, start, end) == CUDA_SUCCESS);
  BOOST_TEST(ms >= 45.0f);
  BOOST_TEST(ms < 5000.0f);
  BOOST_TEST(sim().cuEventSynchronize(untimed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventElapsedTime(&ms, start, untimed) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventElapsedTime(&ms, untimed, end) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventElapsedTime(nullptr, start, end) == CUDA_ERROR_INVALID_VALUE);

  BOOST_TEST(sim().cuEventDestroy(start) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventDestroy(start) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventQuery(start) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventRecord(start, stream) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventDestroy(end) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventDestroy(untimed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(cu_stream_wait_event_orders_one_stream_after_a_point_in_another) {
  sim_context fixture;
  CUstream producer = stream_create();
  CUstream consumer = stream_create();
  CUevent event = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  const CUdeviceptr device = device_alloc(4096);
  const std::vector<std::byte> data = random_bytes(4096, 12);
  std::vector<std::byte> out = poisoned_bytes(4096);
  {
    ferry::sim::gate hold(producer);
    BOOST_TEST(sim().cuMemcpyHtoDAsync(device, data.data(), 4096, producer) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuEventRecord(event, producer) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamWaitEvent(consumer, event, 0x4) == CUDA_ERROR_INVALID_VALUE);
    BOOST_TEST(sim().cuStreamWaitEvent(consumer, event, 0) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuMemcpyDtoHAsync(out.data(), device, 4096, consumer) == CUDA_SUCCESS);
    std::this_thread::sleep_for(20ms);
    BOOST_TEST(sim().cuStreamQuery(consumer) == CUDA_ERROR_NOT_READY);
    // Recording again later does not move the point the consumer waits for.
    BOOST_TEST(sim().cuEventRecord(event, consumer) == CUDA_SUCCESS);
  }
  BOOST_TEST(sim().cuStreamSynchronize(consumer) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(out, data));
  BOOST_TEST(sim().cuStreamWaitEvent(consumer, reinterpret_cast<CUevent>(&out), 0) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventDestroy(event) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(producer) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(consumer) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(stream_wait_value_blocks_until_a_stream_write_value_satisfies_it) {
  sim_context fixture;
  CUstream waiter = stream_create();
  CUstream writer = stream_create();
  const CUdeviceptr word = device_alloc(64);
  BOOST_REQUIRE(sim().cuMemsetD32(word, 0, 16) == CUDA_SUCCESS);
  std::atomic<bool> released{false};
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word, 5, CU_STREAM_WAIT_VALUE_EQ) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuLaunchHostFunc(waiter, raise_flag, &released) == CUDA_SUCCESS);
  std::this_thread::sleep_for(20ms);
  BOOST_TEST(sim().cuStreamQuery(waiter) == CUDA_ERROR_NOT_READY);
  BOOST_TEST(sim().cuStreamWriteValue32(writer, word, 4, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(writer) == CUDA_SUCCESS);
  std::this_thread::sleep_for(10ms);
  BOOST_TEST(!released.load());
  // The v2 entry point (what cuda.h names cuStreamWriteValue32) refuses NO_MEMORY_BARRIER, as the H200's
  // driver does (bench/completion_signals met it).
  BOOST_TEST(sim().cuStreamWriteValue32(writer, word, 5, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWriteValue32(writer, word, 5, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(waiter) == CUDA_SUCCESS);
  BOOST_TEST(released.load());

  // The other conditions, on values that already satisfy them.
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word, 3, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word, 4, CU_STREAM_WAIT_VALUE_AND) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word, 2, CU_STREAM_WAIT_VALUE_NOR) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(waiter) == CUDA_SUCCESS);

  CUdeviceptr managed = 0;
  BOOST_REQUIRE(sim().cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, managed, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWriteValue32(writer, managed, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word + 2, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word + 64, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWaitValue32(waiter, word, 0, 0x10) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuStreamWriteValue32(writer, word, 0, 0x2) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(waiter) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(writer) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(word) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(stream_wait_value_sees_the_host_write_mapped_pinned_memory) {
  sim_context fixture;
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS);
  auto* flag = static_cast<std::uint32_t*>(pinned);
  std::atomic_ref<std::uint32_t>(*flag).store(0);
  CUdeviceptr device_flag = 0;
  BOOST_REQUIRE(sim().cuMemHostGetDevicePointer(&device_flag, pinned, 0) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  BOOST_TEST(sim().cuStreamWaitValue32(stream, device_flag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamWriteValue32(stream, device_flag + 4, 77, 0) == CUDA_SUCCESS);
  std::this_thread::sleep_for(20ms);
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_ERROR_NOT_READY);
  std::atomic_ref<std::uint32_t>(*flag).store(1, std::memory_order_release);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  BOOST_TEST(std::atomic_ref<std::uint32_t>(flag[1]).load() == 77u);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
}

// A twin of `fill_u32(unsigned* out, unsigned value, size_t count)`.
ferry::sim::kernel_twin fill_twin() {
  return [](void** params) {
    const CUdeviceptr out = *static_cast<CUdeviceptr*>(params[0]);
    const unsigned value = *static_cast<unsigned*>(params[1]);
    const std::size_t count = *static_cast<std::size_t*>(params[2]);
    return [out, value, count] {
      auto* words = static_cast<unsigned*>(ferry::sim::host_address(out, count * sizeof(unsigned)));
      for (std::size_t i = 0; i < count; ++i) words[i] = value;
    };
  };
}

BOOST_AUTO_TEST_CASE(kernels_are_host_twins_launched_in_stream_order_with_their_parameters_read_at_launch) {
  sim_context fixture;
  ferry::sim::register_kernel("ferry_sim_test_fill_u32", fill_twin());
  CUmodule module = nullptr;
  BOOST_TEST(sim().cuModuleLoadData(&module, nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_REQUIRE(sim().cuModuleLoadData(&module, "any image") == CUDA_SUCCESS);
  CUfunction function = nullptr;
  BOOST_TEST(sim().cuModuleGetFunction(&function, module, "no_such_kernel") == CUDA_ERROR_NOT_FOUND);
  BOOST_REQUIRE(sim().cuModuleGetFunction(&function, module, "ferry_sim_test_fill_u32") == CUDA_SUCCESS);
  CUfunction same = nullptr;
  BOOST_TEST(sim().cuModuleGetFunction(&same, module, "ferry_sim_test_fill_u32") == CUDA_SUCCESS);
  BOOST_TEST(same == function);

  CUstream stream = stream_create();
  const CUdeviceptr device = device_alloc(1024 * sizeof(unsigned));
  CUdeviceptr out = device;
  unsigned value = 0xabcdef01u;
  std::size_t count = 1024;
  void* params[] = {&out, &value, &count};
  {
    ferry::sim::gate hold(stream);
    BOOST_TEST(sim().cuLaunchKernel(function, 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS);
    value = 0;  // read at launch: this does not change what the kernel writes
  }
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_SUCCESS);
  std::vector<unsigned> words(1024);
  BOOST_TEST(sim().cuMemcpyDtoH(words.data(), device, 4096) == CUDA_SUCCESS);
  BOOST_TEST(std::all_of(words.begin(), words.end(), [](unsigned w) { return w == 0xabcdef01u; }));

  BOOST_TEST(sim().cuLaunchKernel(function, 0, 1, 1, 1, 1, 1, 0, stream, params, nullptr) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuLaunchKernel(function, 1, 1, 1, 1025, 1, 1, 0, stream, params, nullptr) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr) == CUDA_ERROR_INVALID_HANDLE);

  // A twin touching memory outside any allocation faults like a kernel: sticky ILLEGAL_ADDRESS.
  count = 1025;
  BOOST_TEST(sim().cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
  ferry::sim::reset_faults();

  BOOST_TEST(sim().cuModuleUnload(module) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuModuleUnload(module) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ferry::testing
