// The sim before cuInit, in a process of its own (cuInit cannot be undone). Runs with
// FERRY_SIM_DEVICES=3 to show that the variable sets the device count.
#include <cstring>

#include "tests/sim/sim_test_support.hpp"

namespace ferry::testing {
namespace {

BOOST_AUTO_TEST_CASE(calls_before_cu_init_return_not_initialized_but_version_and_error_queries_answer) {
  int count = -1;
  BOOST_TEST(sim().cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr pointer = 0;
  BOOST_TEST(sim().cuMemAlloc(&pointer, 16) == CUDA_ERROR_NOT_INITIALIZED);
  CUcontext ctx = nullptr;
  BOOST_TEST(sim().cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_ERROR_NOT_INITIALIZED);

  int version = 0;
  BOOST_TEST(sim().cuDriverGetVersion(&version) == CUDA_SUCCESS);
  BOOST_TEST(version == CUDA_VERSION);
  const char* name = nullptr;
  BOOST_TEST(sim().cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &name) == CUDA_SUCCESS);
  BOOST_TEST(std::strcmp(name, "CUDA_ERROR_NOT_INITIALIZED") == 0);

  BOOST_TEST(sim().cuInit(1) == CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(sim().cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
  BOOST_TEST(sim().cuInit(0) == CUDA_SUCCESS);
  BOOST_TEST(sim().cuDeviceGetCount(&count) == CUDA_SUCCESS);
}

BOOST_AUTO_TEST_CASE(ferry_sim_devices_sets_the_number_of_devices) {
  BOOST_REQUIRE(sim().cuInit(0) == CUDA_SUCCESS);
  int count = 0;
  BOOST_TEST(sim().cuDeviceGetCount(&count) == CUDA_SUCCESS);
  BOOST_TEST(count == 3);
  char name[64] = {};
  BOOST_TEST(sim().cuDeviceGetName(name, sizeof name, 2) == CUDA_SUCCESS);
  BOOST_TEST(std::strcmp(name, "ferry sim device 2") == 0);
  CUdevice device = -1;
  BOOST_TEST(sim().cuDeviceGet(&device, 3) == CUDA_ERROR_INVALID_DEVICE);
}

}  // namespace
}  // namespace ferry::testing
