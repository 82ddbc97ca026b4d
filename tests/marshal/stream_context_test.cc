// Streams (create, destroy, synchronize, query) and contexts (primary, created, current).
#include <boost/test/unit_test.hpp>

#include <cstdint>

#include "ferry/context.hpp"
#include "ferry/marshal.hpp"
#include "ferry/stream.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

BOOST_FIXTURE_TEST_SUITE(streams_and_contexts, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_stream_runs_its_work_in_order_and_reports_ready_when_done) {
  const std::size_t count = 1 << 20;
  auto values = random_vector<std::uint32_t>(count, 61);
  pinned_buffer<std::uint32_t> host = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(values.begin(), values.end(), host.data());
  device_buffer<std::uint32_t> a = device_buffer<std::uint32_t>::allocate(count);
  device_buffer<std::uint32_t> b = device_buffer<std::uint32_t>::allocate(count);
  stream s = stream::create(stream_flags::blocking);
  // Each step reads what the previous one wrote: only in-order execution gives back the values.
  poke_array_async(count, host_ptr<const std::uint32_t>(host.get()), a.get(), s);
  copy_array_async(count, device_ptr<const std::uint32_t>(a.get()), b.get(), s);
  memset_async(a.get(), count, 0u, s);
  peek_array_async(count, device_ptr<const std::uint32_t>(b.get()), host.get(), s);
  s.synchronize();
  BOOST_TEST(s.ready());
  BOOST_CHECK(std::equal(values.begin(), values.end(), host.data()));
}

BOOST_AUTO_TEST_CASE(stream_owner_moves_destroys_and_releases) {
  stream a = stream::create();
  stream b = stream::create();
  CUstream held = a.get();
  b = std::move(a);  // destroys b's stream
  BOOST_TEST(b.get() == held);
  BOOST_TEST(a.get() == nullptr);
  CUstream released = b.release();
  stream adopted = stream::adopt(released);
  adopted.destroy();
  BOOST_TEST(adopted.get() == nullptr);
}

BOOST_AUTO_TEST_CASE(created_contexts_do_not_change_the_current_context) {
  CUcontext before = context_ref::current().get();
  context second = context::create(device::get(0));
  BOOST_TEST(context_ref::current().get() == before);
  BOOST_TEST(!second.is_primary());
  BOOST_CHECK(second.device() == device::get(0));
  {
    context_guard guard(second);
    BOOST_TEST(context_ref::current().get() == second.get());
  }
  BOOST_TEST(context_ref::current().get() == before);
}

BOOST_AUTO_TEST_CASE(device_queries_answer_and_bad_ordinals_are_rejected) {
  device d = device::get(0);
  BOOST_TEST(!d.name().empty());
  BOOST_TEST(d.total_memory() > 0u);
  BOOST_TEST(d.attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) == 1);
  expect_error<std::invalid_argument>([] { device::get(1000); }, {"device::get: ordinal 1000 is not in [0, "});
  expect_error<std::invalid_argument>([] { device::get(-1); }, {"device::get: ordinal -1"});
}

BOOST_AUTO_TEST_SUITE_END()
