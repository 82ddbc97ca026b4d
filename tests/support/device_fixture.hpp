// The fixture every driver-touching suite uses: device 0's primary context, current for the test, and on
// the sim backend a check that the test left no allocation, stream, event or context behind.
#pragma once

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <iostream>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/launch.hpp"
#include "ferry/backend.hpp"
#include "ferry/context.hpp"
#include "sim/control.hpp"

namespace ferry::testing {

inline bool on_sim() { return ferry::active_backend() == ferry::backend::sim; }

// Says once per process which backend the tests run on.
inline void announce_backend() {
  static const bool announced = [] {
    std::cout << "ferry tests on the " << ferry::to_string(ferry::active_backend()) << " backend\n";
    return true;
  }();
  (void)announced;
}

// Decorators for cases that need one backend: `BOOST_AUTO_TEST_CASE(name, *only_on_sim())`. Boost
// reports such a case as skipped on the other backend.
inline auto only_on_sim() {
  return boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result result(on_sim());
    result.message() << "needs the sim backend (fault injection or gates)";
    return result;
  });
}

inline auto only_with_two_devices() {
  return boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result result(ferry::device::count() >= 2);
    result.message() << "needs two devices; " << ferry::device::count() << " present";
    return result;
  });
}

// What a test can hold when it starts and must hold again when it ends (sim only).
inline sim::usage usage_now() { return on_sim() ? sim::current_usage() : sim::usage{}; }

// While it lives, the sim moves `bytes` in `each`, by copy engine or copy kernel (sim::set_copy_bandwidth;
// nothing on a GPU). A small copy joins a batch only while another is in flight, and the sim moves a copy as fast as
// memcpy: on a loaded machine (a sanitizer's build beside a compile) it could answer each copy before the
// next one starts, and none would meet. Paced, copies started one after another stay in flight.
class paced_sim_copies {
 public:
  explicit paced_sim_copies(std::size_t bytes, std::chrono::microseconds each = std::chrono::milliseconds(2)) {
    if (on_sim()) sim::set_copy_bandwidth(static_cast<double>(bytes) / std::chrono::duration<double>(each).count());
  }
  ~paced_sim_copies() {
    if (on_sim()) sim::set_copy_bandwidth(0);  // the sim's default: as fast as memcpy
  }
  paced_sim_copies(const paced_sim_copies&) = delete;
  paced_sim_copies& operator=(const paced_sim_copies&) = delete;
};

struct device_fixture {
  device_fixture() : primary(context::primary(device::get(0))), guard(primary) {
    announce_backend();
    if (on_sim()) sim::reset_faults();
    before = usage_now();
  }
  ~device_fixture() {
    // Kernels stay loaded for the context's life; a test that used them leaves its module here.
    detail::unload_kernels();
    if (on_sim()) {
      sim::reset_faults();
      const sim::usage after = usage_now();
      BOOST_CHECK_MESSAGE(after == before, "the test leaked: device allocations "
                                               << before.device_allocations << " -> " << after.device_allocations
                                               << ", pinned " << before.pinned_allocations << " -> "
                                               << after.pinned_allocations << ", managed " << before.managed_allocations
                                               << " -> " << after.managed_allocations << ", registered "
                                               << before.registered_ranges << " -> " << after.registered_ranges
                                               << ", streams " << before.streams << " -> " << after.streams
                                               << ", events " << before.events << " -> " << after.events
                                               << ", modules " << before.modules << " -> " << after.modules);
    }
  }

  context primary;
  context_guard guard;
  sim::usage before;
};

}  // namespace ferry::testing
