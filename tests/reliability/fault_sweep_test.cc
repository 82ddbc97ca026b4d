// Fault-injection sweep (sim): each operation runs once to learn which driver calls it makes; then, for
// every entry point it calls and every call index in turn, that one call fails. Each run must report a
// ferry error (or succeed where the failed call had a fallback), leak nothing, and leave the next run
// to succeed with every byte right.
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/driver/sim/control.hpp"
#include "engine/kernels/launch.hpp"
#include "ferry/engine.hpp"
#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

// Releases (the driver refusing to free leaves the memory held: there is nobody to report it to, and the
// real driver refuses only pointers it does not know or a dead context) and message lookups are not
// failed.
const std::set<std::string> not_failed = {
    "cuMemFree",      "cuMemFreeHost",  "cuMemHostUnregister",      "cuStreamDestroy", "cuEventDestroy",
    "cuModuleUnload", "cuCtxDestroy",   "cuDevicePrimaryCtxRelease", "cuCtxPopCurrent", "cuGetErrorName",
    "cuGetErrorString"};

void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(what);
}

// Runs an engine op to completion: its handler (on the system executor, since the test runs no
// io_context) hands the error over as a value, not as an exception, and this throws it. An op that never
// completes is a defect the sweep reports.
template <class Start>
void await(Start start) {
  auto promise = std::make_shared<std::promise<boost::system::error_code>>();
  auto future = promise->get_future();
  start(asio::bind_executor(asio::system_executor(),
                            [promise](boost::system::error_code error, auto&&...) { promise->set_value(error); }));
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    throw std::logic_error("an operation did not complete within 10 s after an injected failure");
  }
  if (const boost::system::error_code error = future.get()) throw boost::system::system_error(error);
}

struct operation_case {
  const char* name;
  std::function<void()> run;  // throws on failure; leaves nothing allocated either way
};

std::vector<operation_case> cases() {
  return {
      {"poke_array then peek_array",
       [] {
         auto values = random_vector<std::uint32_t>(4099, 1);
         device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(values.size());
         poke_array(values.size(), values.data(), device.get());
         require(same_bytes(peek_list_array(values.size(), device.get()), values), "round trip bytes");
       }},
      {"copy_array and memset",
       [] {
         auto values = random_vector<std::uint32_t>(1000, 2);
         device_buffer<std::uint32_t> a = device_buffer<std::uint32_t>::allocate(1000);
         device_buffer<std::uint32_t> b = device_buffer<std::uint32_t>::allocate(1000);
         poke_array(1000, values.data(), a.get());
         copy_array(1000, device_ptr<const std::uint32_t>(a.get()), b.get());
         memset(a.get(), 1000, 7u);
         require(same_bytes(peek_list_array(1000, b.get()), values), "copy bytes");
         require(peek_list_array(1000, a.get())[999] == 7u, "memset value");
       }},
      {"poke_array_2d",
       [] {
         auto values = random_vector<std::uint16_t>(64 * 32, 3);
         device_buffer<std::uint16_t> device = device_buffer<std::uint16_t>::allocate(80 * 32);
         poke_array_2d(60, 30, values.data(), 64, 2, 1, device.get(), 80, 5, 2);
         auto back = peek_list_array(80 * 32, device.get());
         require(back[2 * 80 + 5] == values[1 * 64 + 2], "2-D corner");
       }},
      {"pinned async round trip on a stream",
       [] {
         auto values = random_vector<std::uint64_t>(2048, 4);
         pinned_buffer<std::uint64_t> pinned = pinned_buffer<std::uint64_t>::allocate(2048);
         std::copy(values.begin(), values.end(), pinned.data());
         device_buffer<std::uint64_t> device = device_buffer<std::uint64_t>::allocate(2048);
         stream s = stream::create();
         poke_array_async(2048, host_ptr<const std::uint64_t>(pinned.get()), device.get(), s);
         memset_async(device.get(), 1, std::uint64_t{9}, s);
         peek_array_async(2048, device_ptr<const std::uint64_t>(device.get()), pinned.get(), s);
         s.synchronize();
         require(pinned.data()[0] == 9 && std::equal(values.begin() + 1, values.end(), pinned.data() + 1), "bytes");
       }},
      {"register_array round trip",
       [] {
         auto values = random_vector<std::uint32_t>(1 << 14, 5);
         host_registration<std::uint32_t> registered = host_registration<std::uint32_t>::register_range(std::span(values));
         device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(values.size());
         stream s = stream::create();
         poke_array_async(values.size(), host_ptr<const std::uint32_t>(registered.get()), device.get(), s);
         s.synchronize();
         require(same_bytes(peek_list_array(values.size(), device.get()), values), "bytes");
       }},
      {"peer copy between two contexts",
       [] {
         auto values = random_vector<std::uint32_t>(512, 6);
         context second = context::create(device::get(0));
         device_buffer<std::uint32_t> a = device_buffer<std::uint32_t>::allocate(512);
         poke_array(512, values.data(), a.get());
         context_guard in_second(second);
         device_buffer<std::uint32_t> b = device_buffer<std::uint32_t>::allocate(512);
         copy_array_peer(512, device_ptr<const std::uint32_t>(a.get()), context_ref::current(), b.get(), second);
         require(same_bytes(peek_list_array(512, b.get()), values), "bytes");
       }},
      {"managed prefetch",
       [] {
         auto values = random_vector<std::uint32_t>(4096, 7);
         managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(4096);
         std::copy(values.begin(), values.end(), managed.host_span().begin());
         stream s = stream::create();
         prefetch_array_async(managed.get(), 4096, memory_location::on(device::get(0)), s);
         prefetch_array_async(managed.get(), 4096, memory_location::host(), s);
         s.synchronize();
         require(std::equal(values.begin(), values.end(), managed.host_span().begin()), "bytes");
       }},
      {"engine: staged poke, batched and single copies, memset, peek, wait_all",
       [] {
         asio::io_context io;
         engine_options options;
         options.staging_chunk_bytes = 64 << 10;
         options.staging_chunks = 2;
         engine gpu{io.get_executor(), options};
         auto values = random_vector<std::uint32_t>((256 << 10) / 4, 8);
         auto device = gpu.allocate<std::uint32_t>(values.size());
         await([&](auto done) { gpu.poke(std::span<const std::uint32_t>(values), device.get(), done); });
         auto other = gpu.allocate<std::uint32_t>(values.size());
         await([&](auto done) { gpu.copy(device_ptr<const std::uint32_t>(device.get()), other.get(), values.size(), done); });
         await([&](auto done) { gpu.memset(device.get(), 16, std::uint32_t{3}, done); });
         std::vector<std::uint32_t> back(values.size());
         await([&](auto done) { gpu.peek(device_ptr<const std::uint32_t>(other.get()), std::span<std::uint32_t>(back), done); });
         await([&](auto done) { gpu.wait_all(done); });
         require(same_bytes(back, values), "engine bytes");
       }},
  };
}

// Runs one case with one injected failure and says how it ended.
std::string run_with_failure(const operation_case& c) {
  try {
    c.run();
    return "succeeded";
  } catch (const cuda_error& e) {
    return std::string("cuda_error: ") + e.what();
  } catch (const out_of_memory& e) {
    return std::string("out_of_memory: ") + e.what();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid_argument: ") + e.what();
  } catch (const boost::system::system_error& e) {
    return std::string("error_code: ") + e.what();
  }
  // Anything else (a logic_error from a wrong byte or a hang) propagates and fails the test.
}

// One clean run of a case: what the driver held before it (kernels unloaded: they stay loaded for a
// context's life, which is not a leak) and how many times it called each entry point.
struct learned {
  sim::usage clean;
  std::map<std::string, std::size_t> calls;
};

learned learn(const operation_case& c) {
  detail::unload_kernels();
  learned result{ferry::testing::usage_now(), {}};
  const auto before = sim::call_counts();
  c.run();
  for (const auto& [entry, count] : sim::call_counts()) result.calls[entry] = count - before.at(entry);
  return result;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(fault_sweep, ferry::testing::device_fixture, *ferry::testing::only_on_sim())

BOOST_AUTO_TEST_CASE(every_driver_call_of_every_operation_can_fail_once_without_leaks_or_damage) {
  std::size_t injected = 0, reported = 0;
  for (const operation_case& c : cases()) {
    const learned run = learn(c);
    const sim::usage& clean = run.clean;
    for (const auto& [entry, calls] : run.calls) {
      if (calls == 0 || not_failed.count(entry)) continue;
      for (std::size_t nth = 1; nth <= calls; ++nth) {
        sim::reset_faults();
        sim::fail_call(entry, static_cast<unsigned>(nth), CUDA_ERROR_UNKNOWN);
        const std::string outcome = run_with_failure(c);
        sim::reset_faults();
        ++injected;
        if (outcome != "succeeded") ++reported;
        detail::unload_kernels();  // kernels stay loaded for the context's life: not a leak
        const sim::usage now = ferry::testing::usage_now();
        BOOST_CHECK_MESSAGE(now == clean, c.name << ": failing call " << nth << " of " << entry << " (" << outcome
                                                 << ") left allocations, streams or events behind: device "
                                                 << clean.device_allocations << "->" << now.device_allocations << ", pinned "
                                                 << clean.pinned_allocations << "->" << now.pinned_allocations << ", registered "
                                                 << clean.registered_ranges << "->" << now.registered_ranges << ", streams "
                                                 << clean.streams << "->" << now.streams << ", events " << clean.events << "->"
                                                 << now.events << ", contexts " << clean.contexts << "->" << now.contexts << ", managed " << clean.managed_allocations << "->" << now.managed_allocations << ", device bytes " << clean.device_bytes << "->" << now.device_bytes << ", pinned bytes " << clean.pinned_bytes << "->" << now.pinned_bytes << ", modules " << clean.modules << "->" << now.modules);
        try {
          c.run();  // the next run succeeds, every byte right
        } catch (const std::exception& e) {
          BOOST_ERROR(c.name << ": after failing call " << nth << " of " << entry << " (" << outcome
                             << "), the next run failed: " << e.what());
          sim::reset_faults();
        }
      }
    }
  }
  BOOST_TEST_MESSAGE(injected << " failures injected, " << reported << " reported as errors, the rest absorbed");
  BOOST_TEST(injected > 100u);
}

BOOST_AUTO_TEST_CASE(every_allocation_point_can_run_out_of_memory_and_says_so) {
  // The allocating entry points, failed with CUDA_ERROR_OUT_OF_MEMORY at each call index: the caller
  // sees ferry::out_of_memory (a std::bad_alloc), or the engine op completes with that status.
  const std::set<std::string> allocating = {"cuMemAlloc", "cuMemHostAlloc", "cuMemAllocManaged", "cuMemHostRegister"};
  std::size_t injected = 0;
  for (const operation_case& c : cases()) {
    const learned run = learn(c);
    const sim::usage& clean = run.clean;
    for (const std::string& entry : allocating) {
      const std::size_t calls = run.calls.at(entry);
      for (std::size_t nth = 1; nth <= calls; ++nth) {
        sim::reset_faults();
        sim::fail_call(entry, static_cast<unsigned>(nth), CUDA_ERROR_OUT_OF_MEMORY);
        const std::string outcome = run_with_failure(c);
        sim::reset_faults();
        ++injected;
        const bool said_so = outcome.rfind("out_of_memory:", 0) == 0 ||
                             (outcome.rfind("error_code:", 0) == 0 && outcome.find("OUT_OF_MEMORY") != std::string::npos);
        BOOST_CHECK_MESSAGE(said_so, c.name << ": " << entry << " call " << nth << " out of memory ended as: " << outcome);
        detail::unload_kernels();
        BOOST_CHECK_MESSAGE(ferry::testing::usage_now() == clean, c.name << ": out of memory at " << entry << " call "
                                                                          << nth << " left something behind");
      }
    }
  }
  BOOST_TEST_MESSAGE(injected << " out-of-memory failures injected at allocation points");
  BOOST_TEST(injected >= 10u);
}

BOOST_AUTO_TEST_SUITE_END()
