// The sim's fault injection, thread safety, and behaviour at process exit.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

void raise_flag(void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); }

BOOST_AUTO_TEST_SUITE(sim_faults)

BOOST_AUTO_TEST_CASE(fail_call_fails_the_nth_call_of_an_entry_point_once_counting_from_when_it_is_armed) {
  sim_context fixture;
  CUdeviceptr a = device_alloc(64);  // before arming: not counted
  ferry::sim::fail_call("cuMemAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY);
  ferry::sim::fail_call("cuStreamQuery", 1, CUDA_ERROR_LAUNCH_FAILED);
  CUdeviceptr b = device_alloc(64);
  CUdeviceptr c = 0;
  BOOST_TEST(sim().cuMemAlloc(&c, 64) == CUDA_ERROR_OUT_OF_MEMORY);
  BOOST_TEST(c == 0u);  // nothing was done
  CUdeviceptr d = device_alloc(64);
  BOOST_TEST(sim().cuStreamQuery(nullptr) == CUDA_ERROR_LAUNCH_FAILED);
  BOOST_TEST(sim().cuStreamQuery(nullptr) == CUDA_SUCCESS);
  for (CUdeviceptr p : {a, b, d}) BOOST_TEST(sim().cuMemFree(p) == CUDA_SUCCESS);

  ferry::sim::fail_call("cuMemFree", 1, CUDA_ERROR_UNKNOWN);
  ferry::sim::reset_faults();
  CUdeviceptr e = device_alloc(64);
  BOOST_TEST(sim().cuMemFree(e) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(out_of_memory_after_counts_every_kind_of_allocation_until_reset) {
  sim_context fixture;
  ferry::sim::out_of_memory_after(10'000);
  CUdeviceptr device = device_alloc(4000);
  void* pinned = nullptr;
  BOOST_TEST(sim().cuMemHostAlloc(&pinned, 4000, 0) == CUDA_SUCCESS);
  CUdeviceptr managed = 0;
  BOOST_TEST(sim().cuMemAllocManaged(&managed, 3000, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
  std::vector<std::byte> host(1000);
  BOOST_TEST(sim().cuMemHostRegister(host.data(), 1000, 0) == CUDA_SUCCESS);
  CUdeviceptr one_too_many = 0;
  BOOST_TEST(sim().cuMemAlloc(&one_too_many, 1001) == CUDA_ERROR_OUT_OF_MEMORY);
  BOOST_TEST(sim().cuMemAlloc(&one_too_many, 1000) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(one_too_many) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemAlloc(&one_too_many, 1) == CUDA_ERROR_OUT_OF_MEMORY);  // frees do not refill it
  ferry::sim::reset_faults();
  BOOST_TEST(sim().cuMemAllocManaged(&managed, 3000, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(managed) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemHostUnregister(host.data()) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_failed_stream_poisons_its_context_with_a_sticky_error_until_reset) {
  sim_context fixture;
  CUcontext other = nullptr;
  BOOST_REQUIRE(sim().cuDevicePrimaryCtxRetain(&other, 1) == CUDA_SUCCESS);
  const ferry::sim::usage before = ferry::sim::current_usage();
  CUstream stream = stream_create();
  CUstream sibling = stream_create();
  CUevent after = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&after, 0) == CUDA_SUCCESS);
  const CUdeviceptr device = device_alloc(4096);
  std::vector<std::byte> host = random_bytes(4096, 20);
  CUevent marker = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&marker, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  std::atomic<bool> host_function_ran{false};
  {
    ferry::sim::gate hold(sibling);
    BOOST_TEST(sim().cuLaunchHostFunc(sibling, raise_flag, &host_function_ran) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuEventRecord(marker, sibling) == CUDA_SUCCESS);
    ferry::sim::fail_stream(stream, CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuMemcpyHtoDAsync(device, host.data(), 4096, stream) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
    // Every later call in the context fails; nothing waits on the closed gate.
    BOOST_TEST(sim().cuLaunchHostFunc(sibling, raise_flag, &host_function_ran) == CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuStreamQuery(sibling) == CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuStreamSynchronize(sibling) == CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuEventSynchronize(marker) == CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuEventQuery(marker) == CUDA_ERROR_ILLEGAL_ADDRESS);
    ferry::sim::reset_faults();
    // The work queued behind the gate was discarded, but the event recorded there completed.
    BOOST_TEST(!host_function_ran.load());
    BOOST_TEST(sim().cuEventQuery(marker) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamQuery(sibling) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_SUCCESS);
    ferry::sim::fail_stream(stream, CUDA_ERROR_ILLEGAL_ADDRESS);
    BOOST_TEST(sim().cuMemcpyHtoDAsync(device, host.data(), 4096, stream) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  }
  BOOST_TEST(sim().cuEventRecord(after, stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuEventQuery(after) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuEventSynchronize(after) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS);
  CUdeviceptr more = 0;
  BOOST_TEST(sim().cuMemAlloc(&more, 64) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuMemcpyHtoD(device, host.data(), 16) == CUDA_ERROR_ILLEGAL_ADDRESS);
  BOOST_TEST(sim().cuMemsetD8Async(device, 0, 16, stream) == CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream another = nullptr;
  BOOST_TEST(sim().cuStreamCreate(&another, 0) == CUDA_ERROR_ILLEGAL_ADDRESS);

  // Other contexts carry on.
  BOOST_REQUIRE(sim().cuCtxPushCurrent(other) == CUDA_SUCCESS);
  CUdeviceptr elsewhere = device_alloc(64);
  BOOST_TEST(sim().cuMemFree(elsewhere) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxPopCurrent(nullptr) == CUDA_SUCCESS);

  ferry::sim::reset_faults();
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_SUCCESS);
  std::vector<std::byte> out = poisoned_bytes(4096);
  BOOST_TEST(sim().cuMemcpyDtoH(out.data(), device, 4096) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyHtoDAsync(device, host.data(), 4096, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemcpyDtoHAsync(out.data(), device, 4096, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventRecord(after, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventSynchronize(after) == CUDA_SUCCESS);
  BOOST_TEST(same_bytes(out, host));
  BOOST_TEST(sim().cuEventDestroy(after) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuEventDestroy(marker) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamDestroy(sibling) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage() == before);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(frees_in_a_poisoned_context_release_the_memory_and_report_the_sticky_error) {
  sim_context fixture;
  const ferry::sim::usage before = ferry::sim::current_usage();
  const CUdeviceptr device = device_alloc(64);
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 64, 0) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  ferry::sim::fail_stream(stream, CUDA_ERROR_LAUNCH_FAILED);
  BOOST_REQUIRE(sim().cuMemsetD8Async(device, 0, 64, stream) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuStreamSynchronize(stream) == CUDA_ERROR_LAUNCH_FAILED);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_ERROR_LAUNCH_FAILED);
  BOOST_TEST(sim().cuMemFreeHost(pinned) == CUDA_ERROR_LAUNCH_FAILED);
  BOOST_TEST(sim().cuStreamDestroy(stream) == CUDA_ERROR_LAUNCH_FAILED);
  BOOST_TEST(ferry::sim::current_usage() == before);
}

// The real driver never calls work done that a sticky error stopped: once the failure has happened a
// query returns it, even when the worker has already skipped everything the stream held. Queries
// racing the failure, many times over, must only ever see "not ready" and then the failure.
BOOST_AUTO_TEST_CASE(queries_racing_a_stream_failure_report_the_failure_never_success) {
  sim_context fixture;
  const CUdeviceptr device = device_alloc(64);
  CUevent recorded = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&recorded, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  constexpr int rounds = 300;
  constexpr int pollers = 3;
  std::vector<std::string> wrong;
  for (int round = 0; round < rounds && wrong.empty(); ++round) {
    CUstream stream = stream_create();
    std::atomic<bool> started{false};
    std::vector<CUresult> stream_seen(pollers, CUDA_ERROR_NOT_READY);
    std::vector<CUresult> event_seen(pollers, CUDA_ERROR_NOT_READY);
    {
      ferry::sim::gate hold(stream);
      BOOST_REQUIRE(sim().cuMemsetD8Async(device, static_cast<unsigned char>(round), 64, stream) == CUDA_SUCCESS);
      BOOST_REQUIRE(sim().cuEventRecord(recorded, stream) == CUDA_SUCCESS);
      ferry::sim::fail_stream(stream, CUDA_ERROR_ILLEGAL_ADDRESS);
      std::vector<std::thread> threads;
      for (int p = 0; p < pollers; ++p) {
        threads.emplace_back([&, p] {
          sim().cuCtxSetCurrent(fixture.ctx);
          started.store(true);
          while (stream_seen[p] == CUDA_ERROR_NOT_READY || event_seen[p] == CUDA_ERROR_NOT_READY) {
            if (stream_seen[p] == CUDA_ERROR_NOT_READY) stream_seen[p] = sim().cuStreamQuery(stream);
            if (event_seen[p] == CUDA_ERROR_NOT_READY) event_seen[p] = sim().cuEventQuery(recorded);
          }
        });
      }
      while (!started.load()) std::this_thread::yield();
      hold.open();
      for (std::thread& t : threads) t.join();
    }
    for (int p = 0; p < pollers; ++p) {
      if (stream_seen[p] != CUDA_ERROR_ILLEGAL_ADDRESS || event_seen[p] != CUDA_ERROR_ILLEGAL_ADDRESS) {
        wrong.push_back("round " + std::to_string(round) + " poller " + std::to_string(p) + ": stream query " +
                        std::to_string(stream_seen[p]) + ", event query " + std::to_string(event_seen[p]));
      }
    }
    ferry::sim::reset_faults();
    BOOST_REQUIRE(sim().cuStreamDestroy(stream) == CUDA_SUCCESS);
  }
  BOOST_TEST(wrong.empty(),
             "first wrong answer (CUDA_ERROR_ILLEGAL_ADDRESS is 700): " << (wrong.empty() ? "" : wrong[0]));
  BOOST_TEST(sim().cuEventDestroy(recorded) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuMemFree(device) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(fail_stream_and_gate_refuse_streams_the_sim_does_not_know) {
  sim_context fixture;
  int not_a_stream = 0;
  BOOST_CHECK_THROW(ferry::sim::fail_stream(reinterpret_cast<CUstream>(&not_a_stream)), std::invalid_argument);
  BOOST_CHECK_THROW(ferry::sim::gate(reinterpret_cast<CUstream>(&not_a_stream)), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(many_threads_may_allocate_copy_and_free_at_once) {
  sim_context fixture;
  const ferry::sim::usage before = ferry::sim::current_usage();
  constexpr int threads = 8;
  constexpr int rounds = 25;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      if (sim().cuCtxSetCurrent(fixture.ctx) != CUDA_SUCCESS) ++failures;
      CUstream stream = nullptr;
      if (sim().cuStreamCreate(&stream, t % 2 == 0 ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        ++failures;
        return;
      }
      for (int r = 0; r < rounds; ++r) {
        const std::size_t size = 1000 + static_cast<std::size_t>(t * 977 + r * 131);
        const std::vector<std::byte> data = random_bytes(size, static_cast<std::uint64_t>(t * 1000 + r));
        std::vector<std::byte> out = poisoned_bytes(size);
        CUdeviceptr a = 0;
        CUdeviceptr b = 0;
        bool ok = sim().cuMemAlloc(&a, size) == CUDA_SUCCESS && sim().cuMemAlloc(&b, size) == CUDA_SUCCESS;
        ok = ok && sim().cuMemcpyHtoDAsync(a, data.data(), size, stream) == CUDA_SUCCESS;
        ok = ok && sim().cuMemcpyDtoDAsync(b, a, size, stream) == CUDA_SUCCESS;
        ok = ok && sim().cuMemcpyDtoHAsync(out.data(), b, size, stream) == CUDA_SUCCESS;
        ok = ok && sim().cuStreamSynchronize(stream) == CUDA_SUCCESS;
        ok = ok && out == data;
        ok = ok && sim().cuMemFree(a) == CUDA_SUCCESS && sim().cuMemFree(b) == CUDA_SUCCESS;
        if (!ok) ++failures;
        (void)ferry::sim::current_usage();
      }
      if (sim().cuStreamDestroy(stream) != CUDA_SUCCESS) ++failures;
    });
  }
  for (std::thread& w : workers) w.join();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(ferry::sim::current_usage() == before);
}

// Last: a context and a stream with queued work still alive when the process exits, which must neither
// crash nor hang.
BOOST_AUTO_TEST_CASE(streams_never_destroyed_do_not_crash_the_process_at_exit) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  BOOST_REQUIRE(sim().cuCtxCreate(&ctx, nullptr, 0, 1) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  const CUdeviceptr device = device_alloc(1 << 20);
  // Never freed: the copies may still be writing it while static destructors run.
  static auto* const host = new std::vector<std::byte>(1 << 20);
  ferry::sim::set_copy_bandwidth(1e9);
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(sim().cuMemcpyDtoHAsync(host->data(), device, host->size(), stream) == CUDA_SUCCESS);
  }
  const CUdeviceptr other = device_alloc(1 << 20);
  BOOST_TEST(sim().cuMemsetD8Async(other, 1, 1 << 20, nullptr) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxPopCurrent(nullptr) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ferry::testing
