// Fault-injection sweep (sim): each operation runs once to learn which driver calls it makes; then, for
// every entry point it calls and every call index in turn, that one call fails. Each run must report a
// ferry error (or succeed where the failed call had a fallback), leak nothing, and leave the next run
// to succeed with every byte right. The engine cases take each of its paths (staged, batched by the kernel
// and by the copy engine, block lists, the resident copier) and, in clean runs, check that they did.
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/kernels/launch.hpp"
#include "ferry/engine.hpp"
#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
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

// Whether a failure is being injected into the run: the engine cases check that their ops took the
// paths they ask for only in clean runs (a failed query may send an op down another path that works).
bool injecting = false;

// What the engines of the cases said to engine_options::on_failure (on their threads): a path given up
// for the copy engine is said there, an allocation that ran out of memory included.
std::mutex reports_mutex;
std::vector<std::string> reports;

engine_options reporting(engine_options options = {}) {
  options.on_failure = [](const std::string& report) {
    std::lock_guard lock(reports_mutex);
    reports.push_back(report);
  };
  return options;
}

// A staging pool of two 64 KiB chunks: a staged transfer of a few hundred KiB waits for chunks, and a
// packed block list leaves the pool one.
engine_options two_small_chunks() {
  engine_options options;
  options.staging_chunk_bytes = 64 << 10;
  options.staging_chunks = 2;
  return options;
}

bool reported(std::string_view what) {
  std::lock_guard lock(reports_mutex);
  return std::any_of(reports.begin(), reports.end(), [&](const std::string& r) { return r.find(what) != r.npos; });
}

void forget_reports() {
  std::lock_guard lock(reports_mutex);
  reports.clear();
}

// Starts `count` engine ops one after another without waiting in between (start(i, handler) starts the
// i-th), so that the engine sees them together (small copies given no stream coalesce into batches), and
// runs them to completion: each handler (on the system executor, since the test runs no io_context) hands
// its error over as a value, and the first error is thrown once every started op has completed, so that
// none outlives the memory it moves. An op that never completes is a defect the sweep reports.
template <class Start>
void await_together(std::size_t count, Start start) {
  std::vector<std::future<boost::system::error_code>> completions;
  completions.reserve(count);  // a started op's future is always kept
  auto wait_for_started = [&] {
    boost::system::error_code first;
    for (auto& completion : completions) {
      if (completion.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        throw std::logic_error("an operation did not complete within 10 s after an injected failure");
      }
      if (const boost::system::error_code error = completion.get(); error && !first) first = error;
    }
    return first;
  };
  try {
    for (std::size_t i = 0; i < count; ++i) {
      auto promise = std::make_shared<std::promise<boost::system::error_code>>();
      auto completion = promise->get_future();
      start(i, asio::bind_executor(asio::system_executor(), [promise](boost::system::error_code error, auto&&...) {
              promise->set_value(error);
            }));
      completions.push_back(std::move(completion));
    }
  } catch (...) {  // an initiation threw: that op never started, the ones before it did
    wait_for_started();
    throw;
  }
  if (const boost::system::error_code error = wait_for_started()) throw boost::system::system_error(error);
}

template <class Start>
void await(Start start) {
  await_together(1, [&](std::size_t, auto done) { start(std::move(done)); });
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
      {"engine: staged poke, copy, memset, peek, wait_all",
       [] {
         asio::io_context io;
         engine gpu{io.get_executor(), reporting(two_small_chunks())};
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
         // A small pageable poke and peek: through a small staging slot.
         auto small = random_vector<std::uint32_t>(1024, 13);
         std::vector<std::uint32_t> small_back(small.size());
         await([&](auto done) { gpu.poke(std::span<const std::uint32_t>(small), other.get(), done); });
         await([&](auto done) {
           gpu.peek(device_ptr<const std::uint32_t>(other.get()), std::span<std::uint32_t>(small_back), done);
         });
         require(same_bytes(small_back, small), "small pageable bytes");
       }},
      {"engine: block lists, page-locked by the kernel and by the copy engine, pageable packed and staged",
       [] {
         asio::io_context io;
         engine gpu{io.get_executor(), reporting(two_small_chunks())};
         constexpr std::size_t blocks = 12, block = 1000;  // 4000-byte blocks
         auto values = random_vector<std::uint32_t>(blocks * block, 9);
         pinned_buffer<std::uint32_t> source = pinned_buffer<std::uint32_t>::allocate(values.size());
         pinned_buffer<std::uint32_t> back = pinned_buffer<std::uint32_t>::allocate(values.size());
         std::copy(values.begin(), values.end(), source.data());
         auto device = gpu.allocate<std::uint32_t>(2 * blocks * block);
         // Block i goes to slot 7i + 3 of twice as many, so that neighbours on the host lie apart on the device.
         auto slot = [&](std::size_t i) { return device.get() + (7 * i + 3) % (2 * blocks) * block; };
         std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> pinned_pokes;
         std::vector<block_pair<pinned_span<std::uint32_t>, const std::uint32_t>> pinned_peeks;
         for (std::size_t i = 0; i < blocks; ++i) {
           pinned_pokes.push_back(
               {pinned_span(host_ptr<const std::uint32_t>(source.get() + i * block), block), slot(i)});
           pinned_peeks.push_back(
               {pinned_span(back.get() + i * block, block), device_ptr<const std::uint32_t>(slot(i))});
         }
         for (const auto& [poke_path, peek_path] : {std::pair{batch_path::kernel, batch_path::copy_engine},
                                                     std::pair{batch_path::copy_engine, batch_path::kernel}}) {
           std::fill_n(back.data(), values.size(), 0u);
           await([&](auto done) { gpu.poke_blocks(pinned_pokes, poke_path, done); });
           await([&](auto done) { gpu.peek_blocks(pinned_peeks, peek_path, done); });
           require(std::equal(values.begin(), values.end(), back.data()), "page-locked block list bytes");
         }
         auto pageable_values = random_vector<std::uint32_t>(blocks * block, 10);
         std::vector<std::uint32_t> pageable_back(pageable_values.size());
         std::vector<block_pair<std::span<const std::uint32_t>, std::uint32_t>> pageable_pokes;
         std::vector<block_pair<std::span<std::uint32_t>, const std::uint32_t>> pageable_peeks;
         for (std::size_t i = 0; i < blocks; ++i) {
           pageable_pokes.push_back(
               {std::span<const std::uint32_t>(pageable_values).subspan(i * block, block), slot(i)});
           pageable_peeks.push_back(
               {std::span(pageable_back).subspan(i * block, block), device_ptr<const std::uint32_t>(slot(i))});
         }
         await([&](auto done) { gpu.poke_blocks(pageable_pokes, done); });
         await([&](auto done) { gpu.peek_blocks(pageable_peeks, done); });
         require(same_bytes(pageable_back, pageable_values), "pageable block list bytes");
         // More than a chunk holds: staged chunk by chunk, blocks across the chunks' boundaries, a launch
         // or a batch of copies per chunk.
         constexpr std::size_t large_blocks = 3 * blocks;  // 144,000 bytes: three 64 KiB chunks
         auto large_values = random_vector<std::uint32_t>(large_blocks * block, 12);
         std::vector<std::uint32_t> large_back(large_values.size());
         auto large_device = gpu.allocate<std::uint32_t>(large_values.size());
         std::vector<block_pair<std::span<const std::uint32_t>, std::uint32_t>> large_pokes;
         std::vector<block_pair<std::span<std::uint32_t>, const std::uint32_t>> large_peeks;
         for (std::size_t i = 0; i < large_blocks; ++i) {
           const device_ptr<std::uint32_t> at = large_device.get() + (7 * i + 3) % large_blocks * block;
           large_pokes.push_back({std::span<const std::uint32_t>(large_values).subspan(i * block, block), at});
           large_peeks.push_back(
               {std::span(large_back).subspan(i * block, block), device_ptr<const std::uint32_t>(at)});
         }
         for (const auto& [poke_path, peek_path] : {std::pair{batch_path::kernel, batch_path::copy_engine},
                                                     std::pair{batch_path::copy_engine, batch_path::kernel}}) {
           std::fill(large_back.begin(), large_back.end(), 0u);
           await([&](auto done) { gpu.poke_blocks(large_pokes, poke_path, done); });
           await([&](auto done) { gpu.peek_blocks(large_peeks, peek_path, done); });
           require(same_bytes(large_back, large_values), "staged block list bytes");
         }
         const plan_counts counts = gpu.plan_counts();
         require(injecting || (counts.kernel_block_lists == 6 && counts.copy_engine_block_lists == 4),
                 "block lists took the paths asked for");
       }},
      {"engine: concurrent small pokes and peeks batched by the kernel and by the copy engine",
       [] {
         asio::io_context io;
         engine gpu{io.get_executor(), reporting()};
         constexpr std::size_t copies = 16, each = 1024;  // 4 KiB copies
         auto values = random_vector<std::uint32_t>(copies * each, 11);
         pinned_buffer<std::uint32_t> source = pinned_buffer<std::uint32_t>::allocate(values.size());
         pinned_buffer<std::uint32_t> back = pinned_buffer<std::uint32_t>::allocate(values.size());
         std::copy(values.begin(), values.end(), source.data());
         auto device = gpu.allocate<std::uint32_t>(values.size());
         for (batch_path path : {batch_path::kernel, batch_path::copy_engine}) {
           std::fill_n(back.data(), values.size(), 0u);
           await_together(copies, [&](std::size_t i, auto done) {
             const host_ptr<const std::uint32_t> from(source.get() + i * each);
             gpu.poke(pinned_span(from, each), device.get() + i * each, path, done);
           });
           await_together(copies, [&](std::size_t i, auto done) {
             const device_ptr<const std::uint32_t> from(device.get() + i * each);
             gpu.peek(from, pinned_span(back.get() + i * each, each), path, done);
           });
           require(std::equal(values.begin(), values.end(), back.data()), "batched copy bytes");
         }
       }},
      {"engine: small page-locked copies by the resident copier",
       [] {
         asio::io_context io;
         engine_options options;
         options.resident_copies = true;
         engine gpu{io.get_executor(), reporting(options)};
         constexpr std::size_t copies = 4, each = 1024;
         auto values = random_vector<std::uint32_t>(copies * each, 12);
         pinned_buffer<std::uint32_t> source = pinned_buffer<std::uint32_t>::allocate(values.size());
         pinned_buffer<std::uint32_t> back = pinned_buffer<std::uint32_t>::allocate(values.size());
         std::copy(values.begin(), values.end(), source.data());
         std::fill_n(back.data(), values.size(), 0u);
         auto device = gpu.allocate<std::uint32_t>(values.size());
         for (std::size_t i = 0; i < copies; ++i) {  // one at a time: a batched copy would not be the copier's
           await([&](auto done) {
             const host_ptr<const std::uint32_t> from(source.get() + i * each);
             gpu.poke(pinned_span(from, each), device.get() + i * each, done);
           });
           await([&](auto done) {
             const device_ptr<const std::uint32_t> from(device.get() + i * each);
             gpu.peek(from, pinned_span(back.get() + i * each, each), done);
           });
         }
         require(std::equal(values.begin(), values.end(), back.data()), "resident copier bytes");
         require(injecting || gpu.plan_counts().resident == 2 * copies, "the copies went to the resident copier");
       }},
      {"engine: the program's own copy on a stream, waited for by engine::wait",
       [] {
         asio::io_context io;
         engine gpu{io.get_executor(), reporting()};
         auto values = random_vector<std::uint32_t>(4096, 13);
         pinned_buffer<std::uint32_t> source = pinned_buffer<std::uint32_t>::allocate(values.size());
         std::copy(values.begin(), values.end(), source.data());
         auto device = gpu.allocate<std::uint32_t>(values.size());
         stream s = stream::create();
         // However the wait ends, the copy is done before its memory goes (a failed synchronize means
         // the stream's work ended too).
         struct drained {
           stream& s;
           ~drained() {
             try {
               s.synchronize();
             } catch (const cuda_error&) {
             }
           }
         } drain{s};
         poke_array_async(values.size(), host_ptr<const std::uint32_t>(source.get()), device.get(), s);
         await([&](auto done) { gpu.wait(s, done); });
         require(same_bytes(peek_list_array(values.size(), device.get()), values), "the bytes waited for");
       }},
  };
}

// Runs one case with one injected failure and says how it ended.
std::string run_with_failure(const operation_case& c) {
  forget_reports();
  injecting = true;
  struct clean_again {
    ~clean_again() { injecting = false; }
  } after;
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
  std::set<std::string> reached;
  for (const operation_case& c : cases()) {
    const learned run = learn(c);
    const sim::usage& clean = run.clean;
    for (const auto& [entry, calls] : run.calls) {
      if (calls == 0 || not_failed.count(entry)) continue;
      reached.insert(entry);
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
  // The engine's own paths were among them: completion flags, batches and block lists by the copy engine,
  // the gather/scatter and resident kernels (their module's load and launches), a stream wait's check.
  for (const char* entry :
       {"cuStreamWriteValue32", "cuMemcpyBatchAsync", "cuModuleLoadData", "cuLaunchKernel", "cuStreamGetCtx"}) {
    BOOST_TEST(reached.count(entry) == 1u, entry << " failed in turn");
  }
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
        const std::size_t calls_before = sim::call_counts()[entry];
        sim::fail_call(entry, static_cast<unsigned>(nth), CUDA_ERROR_OUT_OF_MEMORY);
        const std::string outcome = run_with_failure(c);
        // Some allocations depend on timing (a descriptor slab per kernel batch in flight at once): a run
        // may make fewer than the clean run did, and then the failure was never injected.
        const bool fired = sim::call_counts()[entry] - calls_before >= nth;
        sim::reset_faults();
        if (fired) ++injected;
        // An engine that gives up a path for the copy engine (no page-locked memory for a kernel's
        // descriptors) moves the bytes all the same and says so to on_failure.
        const bool as_code = outcome.rfind("error_code:", 0) == 0 && outcome.find("OUT_OF_MEMORY") != std::string::npos;
        const bool said_so = outcome.rfind("out_of_memory:", 0) == 0 || as_code ||
                             (outcome == "succeeded" && reported("OUT_OF_MEMORY"));
        BOOST_CHECK_MESSAGE(said_so || !fired,
                            c.name << ": " << entry << " call " << nth << " out of memory ended as: " << outcome);
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
