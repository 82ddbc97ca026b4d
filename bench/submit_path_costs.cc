// Where the time of initiating a small engine op goes: each driver call on the submit path, alone and
// while another thread spins on cuEventQuery (as the completion bridge does), beside a whole engine
// submission. A diagnostic for the per-op overhead (bench/engine_latency's submit_4KiB): it prints a
// table of microseconds per call and writes no result file. The engine core's rows: submit_path_core.cc.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/program.hpp"
#include "bench/submit_path_fixture.hpp"
#include "ferry/detail/spin_pause.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;

namespace ferry::bench {
namespace {

// Runs `body` while a second thread spins on cuEventQuery of a completed event.
double with_spinning_query(const submit_fixture& f, const std::function<double()>& body) {
  CUevent event = nullptr;
  check(f.raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    f.raw.cuCtxSetCurrent(f.primary.get());
    while (!stop.load()) f.raw.cuEventQuery(event);
  });
  const double result = body();
  stop = true;
  spinner.join();
  f.raw.cuEventDestroy(event);
  return result;
}

// Runs `body` while a second thread spins on a word of host memory, pausing between looks, as the
// completion bridge spins on its flags: no driver call, only a busy core beside the submitting one.
double with_spinning_reader(const std::function<double()>& body) {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 4; ++i) detail::spin_pause();
    }
  });
  const double result = body();
  stop = true;
  spinner.join();
  return result;
}

// A page-locked word the GPU can write (as a completion flag is), freed at the end of the row.
struct mapped_word {
  explicit mapped_word(const submit_fixture& f) : f(f) {
    check(f.raw.cuMemHostAlloc(&host, sizeof(std::uint32_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
          "cuMemHostAlloc");
    check(f.raw.cuMemHostGetDevicePointer(&device, host, 0), "cuMemHostGetDevicePointer");
  }
  ~mapped_word() { f.raw.cuMemFreeHost(host); }
  const submit_fixture& f;
  void* host = nullptr;
  CUdeviceptr device = 0;
};

// The range of the allocation that holds `address`, asked as two attributes.
void range_of(const submit_fixture& f, CUdeviceptr address) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  f.raw.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, address);
  f.raw.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, address);
}

std::vector<row> driver_call_rows(submit_fixture& f) {
  const auto copy = [&](int i) { f.copy(i); };
  const auto copy_and_record = [&](int i) {
    f.copy(i);
    f.raw.cuEventRecord(f.events[i], f.s.get());
  };
  const auto sync = [&] { f.synchronize(); };
  const auto nothing = [] {};
  const mapped_word flag(f);
  const auto copy_and_flag = [&](int i) {
    f.copy(i);
    f.raw.cuStreamWriteValue32(f.s.get(), flag.device, static_cast<cuuint32_t>(i + 1), 0);
  };
  return measure_all({
      {"cuMemcpyHtoDAsync 4KiB", [&] { return per_call(copy, sync); }},
      {"cuMemcpyHtoDAsync + cuEventRecord", [&] { return per_call(copy_and_record, sync); }},
      {"cuEventRecord", [&] { return per_call([&](int i) { f.raw.cuEventRecord(f.events[i], f.s.get()); }, sync); }},
      {"cuEventQuery (done)", [&] { return per_call([&](int i) { f.raw.cuEventQuery(f.events[i]); }, nothing); }},
      {"cuCtxGetCurrent", [&] {
         return per_call([&](int) {
           CUcontext current = nullptr;
           f.raw.cuCtxGetCurrent(&current);
         }, nothing);
       }},
      {"cuPointerGetAttribute x2 (pinned host)", [&] { return per_call([&](int i) { range_of(f, f.host_base + i); }, nothing); }},
      {"cuPointerGetAttribute x2 (device)", [&] { return per_call([&](int i) { range_of(f, f.device_base + i); }, nothing); }},
      {"cuPointerGetAttributes, the same two in one call (device)", [&] {
         return per_call([&](int i) {
           CUdeviceptr base = 0;
           std::size_t size = 0;
           CUpointer_attribute asked[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
           void* answers[] = {&base, &size};
           f.raw.cuPointerGetAttributes(2, asked, answers, f.device_base + i);
         }, nothing);
       }},
      {"cuMemcpyHtoDAsync + cuStreamWriteValue32 (a completion flag)", [&] { return per_call(copy_and_flag, sync); }},
      {"cuMemcpyHtoDAsync 4KiB, another thread spinning on a host word",
       [&] { return with_spinning_reader([&] { return per_call(copy, sync); }); }},
      {"cuMemcpyHtoDAsync + cuStreamWriteValue32, another thread spinning on a host word",
       [&] { return with_spinning_reader([&] { return per_call(copy_and_flag, sync); }); }},
      {"cuMemcpyHtoDAsync 4KiB, another thread spinning cuEventQuery",
       [&] { return with_spinning_query(f, [&] { return per_call(copy, sync); }); }},
      {"cuMemcpyHtoDAsync + cuEventRecord, another thread spinning cuEventQuery",
       [&] { return with_spinning_query(f, [&] { return per_call(copy_and_record, sync); }); }},
  });
}

// The round trip of bench/engine_latency, split: the initiating call (a callback token, on the io
// thread as a coroutine's co_await would be), then until the handler has run on that thread.
std::vector<row> engine_round_trip_rows(submit_fixture& f) {
  asio::io_context io(1);
  engine gpu{io.get_executor()};
  std::vector<double> initiation, whole;
  for (int i = 0; i < calls; ++i) {
    bool handled = false;
    asio::post(io, [&] {
      const auto start = clock_type::now();
      gpu.poke(pinned_span(f.source_piece(i), small_bytes), f.destination_piece(i), f.s,
               [&, start](boost::system::error_code, std::size_t) {
                 whole.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
                 handled = true;
               });
      initiation.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
    });
    io.restart();
    while (!handled) io.run_one();
  }
  return {{"engine poke round trip: the initiating call (median)", median(initiation)},
          {"engine poke round trip: until the handler ran (median)", median(whole)}};
}

// Median of `calls` round trips that `start` begins and whose continuation raises the flag it is given,
// the caller spinning on the flag.
double round_trip_us(const std::function<void(std::atomic<bool>&, int)>& start) {
  std::vector<double> samples;
  std::atomic<bool> done{false};
  for (int i = 0; i < calls; ++i) {
    done = false;
    const auto t0 = clock_type::now();
    start(done, i);
    while (!done.load(std::memory_order_acquire)) {
    }
    samples.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  return median(samples);
}

// The same round trip a layer down at a time; each layer is made just before its row, as the engine
// would make it, and kept to the group's end.
std::vector<row> layered_round_trip_rows(submit_fixture& f) {
  std::vector<row> rows;
  rows.push_back({"round trip: raw copy + cuEventRecord, spin cuEventQuery (median)", round_trip_us([&](std::atomic<bool>& done, int i) {
                    f.copy(i);
                    f.raw.cuEventRecord(f.events[0], f.s.get());
                    f.spin_on(f.events[0]);
                    done = true;
                  })});
  detail::engine_core core{engine_options{}};
  rows.push_back({"round trip: engine core prepare_copy + start (median)", round_trip_us([&](std::atomic<bool>& done, int i) {
                    core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(done)),
                               core.prepare_copy("engine::poke", small_bytes, 1,
                                                 detail::pinned_side("source", f.source.data() + i * small_bytes),
                                                 detail::device_side("destination", f.device_base + i * small_bytes)),
                               f.s.get());
                  })});
  return rows;
}

// Submissions alone (callback tokens, completions untimed): on the caller's stream per completion
// policy (and for poll, with the poller writing the completion flags), then on a pool stream (batched).
std::vector<row> engine_submit_rows(submit_fixture& f) {
  std::vector<row> rows;
  struct setting {
    const char* name;
    completion_policy policy;
    completion_mark marks;
    std::optional<std::chrono::microseconds> executor_spin;  // empty: the engine's default
  };
  const std::chrono::microseconds not_kept_awake{0};
  for (auto [name, policy, marks, executor_spin] :
       {setting{"engine poke submit (poll)", completion_policy::poll, completion_mark::by_submitter, {}},
        setting{"engine poke submit (poll, the handler's io_context not kept awake)", completion_policy::poll,
                completion_mark::by_submitter, not_kept_awake},
        setting{"engine poke submit (poll, marks by the poller)", completion_policy::poll, completion_mark::by_poller, {}},
        setting{"engine poke submit (blocking_sync)", completion_policy::blocking_sync, completion_mark::by_submitter,
                {}}}) {
    asio::io_context io(1);
    engine_options engine_options;
    engine_options.policy = policy;
    engine_options.marks = marks;
    engine_options.executor_spin = executor_spin;
    engine gpu{io.get_executor(), engine_options};
    rows.push_back({name, per_call(
                              [&](int i) {
                                gpu.poke(pinned_span(f.source_piece(i), small_bytes), f.destination_piece(i), f.s,
                                         [](boost::system::error_code, std::size_t) {});
                              },
                              [&] {
                                f.synchronize();
                                gpu.wait_all(asio::use_future).get();
                                io.restart();
                                io.poll();
                              })});
  }
  return rows;
}

std::vector<row> batched_submit_rows(submit_fixture& f) {
  asio::io_context io(1);
  engine gpu{io.get_executor()};
  return {{"engine poke submit, pool stream (batched)", per_call([&](int i) {
             gpu.poke(pinned_span(f.source_piece(i), small_bytes), f.destination_piece(i), [](boost::system::error_code, std::size_t) {});
           }, [&] {
             gpu.wait_all(asio::use_future).get();
             io.restart();
             io.poll();
           })}};
}

}  // namespace
}  // namespace ferry::bench

int main(int argc, char** argv) try {
  bench::parse_no_flags(argc, argv,
                        "Where the time of initiating a small engine op goes, driver call by driver call\n"
                        "(a diagnostic: prints a table of us per call, writes no report).");
  const bench::primary_device on;
  bench::submit_fixture fixture(on.primary);
  const std::vector<bench::row> rows =
      bench::run_groups(fixture, {bench::driver_call_rows, bench::engine_round_trip_rows, bench::layered_round_trip_rows,
                                  bench::engine_submit_rows, bench::engine_core_rows, bench::batched_submit_rows});
  std::cout << "| submit path piece (" << on.gpu.name() << ") | us per call |\n|---|---:|\n";
  for (const bench::row& r : rows) std::cout << "| " << r.name << " | " << r.us << " |\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "submit_path_costs: " << error.what() << "\n";
  return 1;
}
