// The sim backend's table, devices, error strings and contexts.
#include <cstring>
#include <string>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

BOOST_AUTO_TEST_SUITE(sim_backend)

BOOST_AUTO_TEST_CASE(every_entry_point_of_the_table_is_filled) {
  const ferry::detail::driver_table& table = sim();
#define FERRY_CHECK_ENTRY(name, version) BOOST_TEST((table.name != nullptr), #name " is filled");
  FERRY_DRIVER_ENTRY_POINTS(FERRY_CHECK_ENTRY)
#undef FERRY_CHECK_ENTRY
}

BOOST_AUTO_TEST_CASE(the_sim_has_two_devices_by_default_named_after_their_ordinal) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  int count = 0;
  BOOST_TEST(sim().cuDeviceGetCount(&count) == CUDA_SUCCESS);
  BOOST_TEST(count == 2);
  char name[64] = {};
  BOOST_TEST(sim().cuDeviceGetName(name, sizeof name, 1) == CUDA_SUCCESS);
  BOOST_TEST(std::string(name) == "ferry sim device 1");
  char short_name[6] = {};
  BOOST_TEST(sim().cuDeviceGetName(short_name, sizeof short_name, 0) == CUDA_SUCCESS);
  BOOST_TEST(std::string(short_name) == "ferry");
  BOOST_TEST(sim().cuDeviceGetName(name, sizeof name, 2) == CUDA_ERROR_INVALID_DEVICE);
  CUdevice device = -1;
  BOOST_TEST(sim().cuDeviceGet(&device, 1) == CUDA_SUCCESS);
  BOOST_TEST(device == 1);
  BOOST_TEST(sim().cuDeviceGet(&device, 2) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuDeviceGet(&device, -1) == CUDA_ERROR_INVALID_DEVICE);
}

BOOST_AUTO_TEST_CASE(device_attributes_describe_a_unified_addressing_sm90_device) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  auto attribute = [](CUdevice_attribute which) {
    int value = -12345;
    BOOST_TEST(sim().cuDeviceGetAttribute(&value, which, 0) == CUDA_SUCCESS);
    return value;
  };
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) == 1);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) == 1);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 1);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 1);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT) == 3);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) == 9);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) == 0);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) > 0);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED) == 1);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) == 0);
  BOOST_TEST(attribute(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR) == 1);
  int value = 0;
  BOOST_TEST(sim().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0) == CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(each_device_has_the_default_memory_and_peers_only_with_other_devices) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  std::size_t total = 0;
  BOOST_TEST(sim().cuDeviceTotalMem(&total, 1) == CUDA_SUCCESS);
  BOOST_TEST(total == ferry::sim::default_device_memory);
  int can = -1;
  BOOST_TEST(sim().cuDeviceCanAccessPeer(&can, 0, 1) == CUDA_SUCCESS);
  BOOST_TEST(can == 1);
  BOOST_TEST(sim().cuDeviceCanAccessPeer(&can, 1, 1) == CUDA_SUCCESS);
  BOOST_TEST(can == 0);
  BOOST_TEST(sim().cuDeviceCanAccessPeer(&can, 0, 5) == CUDA_ERROR_INVALID_DEVICE);
}

BOOST_AUTO_TEST_CASE(peer_attributes_describe_links_between_two_devices_only) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  int value = -1;
  BOOST_TEST(sim().cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1) == CUDA_SUCCESS);
  BOOST_TEST(value == 1);
  BOOST_TEST(sim().cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK, 1, 0) == CUDA_SUCCESS);
  BOOST_TEST(value == 0);
  BOOST_TEST(sim().cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1) ==
             CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuDeviceGetP2PAttribute(&value, static_cast<CUdevice_P2PAttribute>(99), 0, 1) ==
             CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuDeviceGetP2PAttribute(nullptr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1) ==
             CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(error_names_and_strings_are_the_drivers) {
  const std::pair<CUresult, std::pair<const char*, const char*>> expected[] = {
      {CUDA_SUCCESS, {"CUDA_SUCCESS", "no error"}},
      {CUDA_ERROR_INVALID_VALUE, {"CUDA_ERROR_INVALID_VALUE", "invalid argument"}},
      {CUDA_ERROR_OUT_OF_MEMORY, {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"}},
      {CUDA_ERROR_NOT_INITIALIZED, {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"}},
      {CUDA_ERROR_INVALID_CONTEXT, {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"}},
      {CUDA_ERROR_INVALID_HANDLE, {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"}},
      {CUDA_ERROR_NOT_READY, {"CUDA_ERROR_NOT_READY", "device not ready"}},
      {CUDA_ERROR_NOT_FOUND, {"CUDA_ERROR_NOT_FOUND", "named symbol not found"}},
      {CUDA_ERROR_ILLEGAL_ADDRESS, {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"}},
      {CUDA_ERROR_LAUNCH_FAILED, {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"}},
      {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
       {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"}},
      {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
       {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"}},
      {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
       {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"}},
      {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
       {"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"}},
      {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, {"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"}},
      {CUDA_ERROR_INVALID_DEVICE, {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"}},
      {CUDA_ERROR_NOT_SUPPORTED, {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"}},
      {CUDA_ERROR_UNKNOWN, {"CUDA_ERROR_UNKNOWN", "unknown error"}},
  };
  for (const auto& [status, text] : expected) {
    const char* name = nullptr;
    const char* message = nullptr;
    BOOST_TEST(sim().cuGetErrorName(status, &name) == CUDA_SUCCESS);
    BOOST_TEST(sim().cuGetErrorString(status, &message) == CUDA_SUCCESS);
    BOOST_TEST(std::string(name) == text.first);
    BOOST_TEST(std::string(message) == text.second);
  }
  const char* name = "untouched";
  BOOST_TEST(sim().cuGetErrorName(static_cast<CUresult>(12345), &name) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(name == nullptr);
  const char* message = "untouched";
  BOOST_TEST(sim().cuGetErrorString(static_cast<CUresult>(12345), &message) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(message == nullptr);
}

BOOST_AUTO_TEST_CASE(calls_that_need_a_context_return_invalid_context_without_one) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxSetCurrent(nullptr) == CUDA_SUCCESS);
  CUcontext current = reinterpret_cast<CUcontext>(1);
  BOOST_TEST(sim().cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  BOOST_TEST(current == nullptr);
  CUdeviceptr pointer = 0;
  BOOST_TEST(sim().cuMemAlloc(&pointer, 64) == CUDA_ERROR_INVALID_CONTEXT);
  CUstream stream = nullptr;
  BOOST_TEST(sim().cuStreamCreate(&stream, 0) == CUDA_ERROR_INVALID_CONTEXT);
  int host = 0;
  BOOST_TEST(sim().cuMemcpyHtoD(pointer, &host, sizeof host) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT);
  CUdevice device = 0;
  BOOST_TEST(sim().cuCtxGetDevice(&device) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuMemsetD8Async(pointer, 0, 1, nullptr) == CUDA_ERROR_INVALID_CONTEXT);
}

BOOST_AUTO_TEST_CASE(a_primary_context_is_one_handle_counted_by_its_retains) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  const ferry::sim::usage before = ferry::sim::current_usage();
  CUcontext first = nullptr;
  CUcontext second = nullptr;
  BOOST_TEST(sim().cuDevicePrimaryCtxRetain(&first, 1) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuDevicePrimaryCtxRetain(&second, 1) == CUDA_SUCCESS);
  BOOST_TEST(first == second);
  BOOST_TEST(ferry::sim::current_usage().contexts == before.contexts + 1);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage().contexts == before.contexts + 1);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage().contexts == before.contexts);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(9) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuDevicePrimaryCtxRetain(&first, 9) == CUDA_ERROR_INVALID_DEVICE);
  // Released to zero, the handle is dead until retained again.
  BOOST_TEST(sim().cuCtxSetCurrent(second) == CUDA_ERROR_INVALID_CONTEXT);
}

BOOST_AUTO_TEST_CASE(created_contexts_are_pushed_and_the_stack_pops_in_order) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxSetCurrent(nullptr) == CUDA_SUCCESS);
  CUcontext a = nullptr;
  CUcontext b = nullptr;
  BOOST_TEST(sim().cuCtxCreate(&a, nullptr, 0, 0) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxCreate(&b, nullptr, CU_CTX_SCHED_BLOCKING_SYNC, 1) == CUDA_SUCCESS);
  CUcontext current = nullptr;
  BOOST_TEST(sim().cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  BOOST_TEST(current == b);
  CUdevice device = -1;
  BOOST_TEST(sim().cuCtxGetDevice(&device) == CUDA_SUCCESS);
  BOOST_TEST(device == 1);
  CUcontext popped = nullptr;
  BOOST_TEST(sim().cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
  BOOST_TEST(popped == b);
  BOOST_TEST(sim().cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  BOOST_TEST(current == a);
  BOOST_TEST(sim().cuCtxPushCurrent(b) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxSetCurrent(a) == CUDA_SUCCESS);  // replaces the top
  BOOST_TEST(sim().cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
  BOOST_TEST(popped == a);
  BOOST_TEST(sim().cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
  BOOST_TEST(popped == a);
  BOOST_TEST(sim().cuCtxPopCurrent(&popped) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuCtxPushCurrent(nullptr) == CUDA_ERROR_INVALID_VALUE);

  BOOST_TEST(sim().cuCtxDestroy(a) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxDestroy(a) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuCtxPushCurrent(a) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuCtxSetCurrent(b) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxDestroy(b) == CUDA_SUCCESS);  // current: popped as well
  BOOST_TEST(sim().cuCtxGetCurrent(&current) == CUDA_SUCCESS);
  BOOST_TEST(current == nullptr);
  BOOST_TEST(sim().cuCtxDestroy(nullptr) == CUDA_ERROR_INVALID_VALUE);
}

BOOST_AUTO_TEST_CASE(cu_ctx_create_validates_its_flags_device_and_parameters) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  BOOST_TEST(sim().cuCtxCreate(&ctx, nullptr, 0x100, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuCtxCreate(&ctx, nullptr, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD, 0) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuCtxCreate(&ctx, nullptr, 0, 2) == CUDA_ERROR_INVALID_DEVICE);
  BOOST_TEST(sim().cuCtxCreate(nullptr, nullptr, 0, 0) == CUDA_ERROR_INVALID_VALUE);
  CUctxCreateParams params{};
  BOOST_TEST(sim().cuCtxCreate(&ctx, &params, CU_CTX_MAP_HOST, 0) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxDestroy(ctx) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(a_device_cannot_peer_with_itself_and_peer_access_is_enabled_once) {
  sim_context fixture;
  CUcontext other = nullptr;
  BOOST_REQUIRE(sim().cuDevicePrimaryCtxRetain(&other, 1) == CUDA_SUCCESS);
  CUcontext same_device = nullptr;
  BOOST_REQUIRE(sim().cuCtxCreate(&same_device, nullptr, 0, 0) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuCtxSetCurrent(fixture.ctx) == CUDA_SUCCESS);

  BOOST_TEST(sim().cuCtxEnablePeerAccess(other, 1) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuCtxEnablePeerAccess(same_device, 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  BOOST_TEST(sim().cuCtxEnablePeerAccess(fixture.ctx, 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
  BOOST_TEST(sim().cuCtxDisablePeerAccess(other) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  BOOST_TEST(sim().cuCtxEnablePeerAccess(other, 0) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxEnablePeerAccess(other, 0) == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  BOOST_TEST(sim().cuCtxDisablePeerAccess(other) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxDisablePeerAccess(other) == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);

  BOOST_TEST(sim().cuCtxDestroy(same_device) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuCtxEnablePeerAccess(same_device, 0) == CUDA_ERROR_INVALID_CONTEXT);
  BOOST_TEST(sim().cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(destroying_a_context_releases_everything_it_owns) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  const ferry::sim::usage before = ferry::sim::current_usage();
  CUcontext ctx = nullptr;
  BOOST_REQUIRE(sim().cuCtxCreate(&ctx, nullptr, 0, 1) == CUDA_SUCCESS);
  CUdeviceptr device = device_alloc(1 << 20);
  void* pinned = nullptr;
  BOOST_REQUIRE(sim().cuMemHostAlloc(&pinned, 4096, 0) == CUDA_SUCCESS);
  CUstream stream = stream_create();
  CUevent event = nullptr;
  BOOST_REQUIRE(sim().cuEventCreate(&event, 0) == CUDA_SUCCESS);
  BOOST_REQUIRE(sim().cuMemsetD8Async(device, 1, 1 << 20, stream) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage() != before);
  BOOST_TEST(sim().cuCtxDestroy(ctx) == CUDA_SUCCESS);
  BOOST_TEST(ferry::sim::current_usage() == before);
  BOOST_TEST(sim().cuStreamQuery(stream) == CUDA_ERROR_INVALID_HANDLE);
  BOOST_TEST(sim().cuEventQuery(event) == CUDA_ERROR_INVALID_HANDLE);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace ferry::testing
