// Regression (found by tests/stress:stress_test): the registration cache unregisters a range
// when a larger transfer from the same address replaces it, or when forget_host_memory drops it. Both
// happen on the caller's thread, which need not have the engine's context current; cuMemHostUnregister
// then failed (CUDA_ERROR_INVALID_CONTEXT), the pages stayed registered with the driver while the cache
// forgot them, and registering the range again failed, so its transfers fell back to staging (and the
// registration leaked). Here every op is initiated from a thread with no current context.
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <future>
#include <stdexcept>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t threshold = 64 << 10;

// Runs `f` on a new thread, which has no current context; its result and exceptions come back here.
template <class F>
auto on_a_thread_without_context(F f) {
  return std::async(std::launch::async, [f] {
    bool has_context = true;
    try {
      (void)context_ref::current();
    } catch (const std::logic_error&) {
      has_context = false;
    }
    if (has_context) throw std::logic_error("a new thread has a current context");
    return f();
  }).get();
}

struct registering_engine : ferry::testing::device_fixture {
  static engine_options options() {
    engine_options settings;
    settings.registration_threshold_bytes = threshold;
    settings.driver_staged_max_bytes = 0;  // these pokes are small: staged, then registered
    return settings;
  }
  asio::io_context io;
  engine gpu{io.get_executor(), options()};
  std::vector<std::uint8_t> values = random_vector<std::uint8_t>(4 * threshold, 8800);
  device_buffer<std::uint8_t> device = gpu.allocate<std::uint8_t>(values.size());

  void poke_first(std::size_t bytes) {
    const std::size_t moved = on_a_thread_without_context([this, bytes] {
      const std::span<const std::uint8_t> source(values.data(), bytes);
      return gpu.poke(source, device.get(), asio::use_future).get();
    });
    BOOST_TEST(moved == bytes);
    BOOST_TEST(same_bytes(peek_list_array(bytes, device.get()), std::vector(values.begin(), values.begin() + bytes)));
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(registration_context, registering_engine)

BOOST_AUTO_TEST_CASE(a_registration_replaced_by_a_larger_one_from_a_thread_without_context_is_released) {
  poke_first(threshold);      // seen: staged
  poke_first(threshold);      // seen again: registered
  poke_first(2 * threshold);  // larger, same address: the registration is replaced (dropped here)
  poke_first(2 * threshold);  // seen again: registered anew
  BOOST_TEST(gpu.plan_counts().registered == 2u);
  BOOST_TEST(gpu.plan_counts().staged == 2u);
  BOOST_TEST(gpu.pinned_bytes() >= 2 * threshold);
  // device_fixture checks, on sim, that no registration outlives the engine.
}

BOOST_AUTO_TEST_CASE(forgetting_memory_from_a_thread_without_context_releases_its_registration) {
  poke_first(threshold);
  poke_first(threshold);
  BOOST_TEST(gpu.plan_counts().registered == 1u);
  on_a_thread_without_context([this] { gpu.forget_host_memory(std::span(values)); });
  poke_first(threshold);
  poke_first(threshold);  // registered again: the driver no longer holds the old registration
  BOOST_TEST(gpu.plan_counts().registered == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
