// Shared by the sim backend suites: the table under test, a fixture that makes device 0's primary
// context current, and small helpers for device buffers.
#pragma once

#include <cuda.h>

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <ostream>
#include <span>
#include <vector>

#include "engine/driver/driver_table.hpp"
#include "sim/control.hpp"
#include "sim/table.hpp"
#include "tests/support/random_bytes.hpp"

// Failed checks print the status by name.
inline std::ostream& operator<<(std::ostream& out, CUresult status) {
  const char* name = nullptr;
  ferry::detail::sim_table().cuGetErrorName(status, &name);
  return out << (name != nullptr ? name : "CUresult") << " (" << static_cast<int>(status) << ")";
}

namespace ferry::sim {

inline std::ostream& operator<<(std::ostream& out, const usage& u) {
  return out << "{device " << u.device_allocations << " (" << u.device_bytes << " B), pinned " << u.pinned_allocations
             << " (" << u.pinned_bytes << " B), managed " << u.managed_allocations << ", registered "
             << u.registered_ranges << ", streams " << u.streams << ", events " << u.events << ", contexts "
             << u.contexts << ", modules " << u.modules << "}";
}

}  // namespace ferry::sim

namespace ferry::testing {

inline const ferry::detail::driver_table& sim() { return ferry::detail::sim_table(); }

// cuInit, no faults, no throttling, device 0's primary context current; everything the context owns is
// released with it at the end.
struct sim_context {
  sim_context() {
    BOOST_REQUIRE_EQUAL(sim().cuInit(0), CUDA_SUCCESS);
    ferry::sim::reset_faults();
    ferry::sim::set_copy_bandwidth(0);
    BOOST_REQUIRE_EQUAL(sim().cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    BOOST_REQUIRE_EQUAL(sim().cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  }
  ~sim_context() {
    ferry::sim::reset_faults();
    ferry::sim::set_copy_bandwidth(0);
    sim().cuCtxSetCurrent(nullptr);
    sim().cuDevicePrimaryCtxRelease(0);
  }
  sim_context(const sim_context&) = delete;
  sim_context& operator=(const sim_context&) = delete;

  CUcontext ctx = nullptr;
};

inline CUdeviceptr device_alloc(std::size_t bytes) {
  CUdeviceptr p = 0;
  BOOST_REQUIRE_EQUAL(sim().cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  return p;
}

inline CUstream stream_create(unsigned flags = CU_STREAM_NON_BLOCKING) {
  CUstream s = nullptr;
  BOOST_REQUIRE_EQUAL(sim().cuStreamCreate(&s, flags), CUDA_SUCCESS);
  return s;
}

inline std::vector<std::byte> random_bytes(std::size_t count, std::uint64_t seed) {
  std::vector<std::byte> bytes(count);
  fill_random(std::span(bytes), seed);
  return bytes;
}

inline std::vector<std::byte> poisoned_bytes(std::size_t count) {
  std::vector<std::byte> bytes(count);
  poison_fill(std::span(bytes));
  return bytes;
}

inline std::vector<std::byte> read_back(CUdeviceptr source, std::size_t count) {
  std::vector<std::byte> bytes = poisoned_bytes(count);
  BOOST_REQUIRE_EQUAL(sim().cuMemcpyDtoH(bytes.data(), source, count), CUDA_SUCCESS);
  return bytes;
}

inline bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  const auto difference = first_difference(a, b);
  if (difference) BOOST_TEST_MESSAGE("first difference at byte " << *difference);
  return !difference;
}

}  // namespace ferry::testing
