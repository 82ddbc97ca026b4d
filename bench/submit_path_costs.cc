// Where the time of initiating a small engine op goes: each driver call on the submit path, alone and
// while another thread spins on cuEventQuery (as the completion bridge does), beside a whole engine
// submission. A diagnostic for the per-op overhead (bench/engine_latency's submit_4KiB): it prints a
// table of microseconds per call and writes no result file.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/async/completion_bridge.hpp"
#include "engine/async/event_pool.hpp"
#include "engine/async/stream_sequencer.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t small_bytes = 4096;
constexpr int calls = 1024;

using bench::check;
using bench::median;

// Median over 7 rounds of `calls` calls, in microseconds per call; `drain` (untimed) runs after each round.
double per_call_us(const std::function<void(int)>& body, const std::function<void()>& drain) {
  std::vector<double> rounds;
  for (int round = 0; round < 9; ++round) {
    const auto start = clock_type::now();
    for (int i = 0; i < calls; ++i) body(i);
    const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    drain();
    if (round >= 2) rounds.push_back(seconds * 1e6 / calls);
  }
  return median(rounds);
}

// Runs `body` while a second thread spins on cuEventQuery of a completed event.
double with_spinning_query(const detail::driver_table& raw, CUcontext context, const std::function<double()>& body) {
  CUevent event = nullptr;
  check(raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    raw.cuCtxSetCurrent(context);
    while (!stop.load()) raw.cuEventQuery(event);
  });
  const double result = body();
  stop = true;
  spinner.join();
  raw.cuEventDestroy(event);
  return result;
}

// Median of single calls, each timed alone and followed (untimed) by `settle`, which waits until the GPU
// and the engine are idle: what a call costs when no completion runs beside it.
double isolated_us(const std::function<void(int)>& body, const std::function<void()>& settle) {
  std::vector<double> samples;
  for (int i = 0; i < calls; ++i) {
    const auto start = clock_type::now();
    body(i);
    samples.push_back(std::chrono::duration<double>(clock_type::now() - start).count() * 1e6);
    settle();
  }
  return median(samples);
}

struct raise_flag final : detail::completion {
  explicit raise_flag(std::atomic<bool>& done) : done(done) {}
  void complete(boost::system::error_code, std::size_t) override { done.store(true); }
  std::atomic<bool>& done;
};

struct set_on_complete final : detail::completion {
  explicit set_on_complete(std::promise<void>& done) : done(done) {}
  void complete(boost::system::error_code, std::size_t) override { done.set_value(); }
  std::promise<void>& done;
};

}  // namespace

int main(int argc, char** argv) try {
  const bench::options options = bench::parse_options(argc, argv);
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  context_guard guard(primary);
  const auto& raw = detail::driver();
  auto source = pinned_buffer<std::uint8_t>::allocate(small_bytes * calls);
  auto destination = device_buffer<std::uint8_t>::allocate(small_bytes * calls);
  stream s = stream::create();
  const CUdeviceptr device_base = destination.get().get();
  const std::uintptr_t host_base = reinterpret_cast<std::uintptr_t>(source.data());
  auto sync = [&] { check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize"); };
  auto nothing = [] {};
  std::vector<CUevent> events(calls);
  for (CUevent& event : events) check(raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");

  struct row {
    std::string name;
    double us;
  };
  std::vector<row> rows;
  auto copy = [&](int i) {
    raw.cuMemcpyHtoDAsync(device_base + i * small_bytes, source.data() + i * small_bytes, small_bytes, s.get());
  };
  rows.push_back({"cuMemcpyHtoDAsync 4KiB", per_call_us(copy, sync)});
  rows.push_back({"cuMemcpyHtoDAsync + cuEventRecord", per_call_us([&](int i) {
                    copy(i);
                    raw.cuEventRecord(events[i], s.get());
                  }, sync)});
  rows.push_back({"cuEventRecord", per_call_us([&](int i) { raw.cuEventRecord(events[i], s.get()); }, sync)});
  rows.push_back({"cuEventQuery (done)", per_call_us([&](int i) { raw.cuEventQuery(events[i]); }, nothing)});
  rows.push_back({"cuCtxGetCurrent", per_call_us([&](int) {
                    CUcontext current = nullptr;
                    raw.cuCtxGetCurrent(&current);
                  }, nothing)});
  rows.push_back({"cuPointerGetAttribute x2 (pinned host)", per_call_us([&](int i) {
                    CUdeviceptr base = 0;
                    std::size_t size = 0;
                    raw.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, host_base + i);
                    raw.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, host_base + i);
                  }, nothing)});
  rows.push_back({"cuPointerGetAttribute x2 (device)", per_call_us([&](int i) {
                    CUdeviceptr base = 0;
                    std::size_t size = 0;
                    raw.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, device_base + i);
                    raw.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, device_base + i);
                  }, nothing)});
  rows.push_back({"cuPointerGetAttributes, the same two in one call (device)", per_call_us([&](int i) {
                    CUdeviceptr base = 0;
                    std::size_t size = 0;
                    CUpointer_attribute asked[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
                    void* answers[] = {&base, &size};
                    raw.cuPointerGetAttributes(2, asked, answers, device_base + i);
                  }, nothing)});
  rows.push_back({"cuMemcpyHtoDAsync 4KiB, another thread spinning cuEventQuery",
                  with_spinning_query(raw, primary.get(), [&] { return per_call_us(copy, sync); })});
  rows.push_back({"cuMemcpyHtoDAsync + cuEventRecord, another thread spinning cuEventQuery",
                  with_spinning_query(raw, primary.get(), [&] {
                    return per_call_us([&](int i) {
                      copy(i);
                      raw.cuEventRecord(events[i], s.get());
                    }, sync);
                  })});
  {
    // The round trip of bench/engine_latency, split: the initiating call (a callback token, on the io
    // thread as a coroutine's co_await would be), then until the handler has run on that thread.
    asio::io_context io(1);
    engine gpu{io.get_executor()};
    std::vector<double> initiation, whole;
    for (int i = 0; i < calls; ++i) {
      bool handled = false;
      asio::post(io, [&] {
        const auto start = clock_type::now();
        gpu.poke(host_ptr<const std::uint8_t>(source.get() + i * small_bytes), small_bytes,
                 destination.get() + i * small_bytes, s, [&, start](boost::system::error_code, std::size_t) {
                   whole.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
                   handled = true;
                 });
        initiation.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
      });
      io.restart();
      while (!handled) io.run_one();
    }
    rows.push_back({"engine poke round trip: the initiating call (median)", median(initiation)});
    rows.push_back({"engine poke round trip: until the handler ran (median)", median(whole)});
  }
  {
    // The same round trip a layer down at a time, the caller spinning on a flag the continuation raises.
    auto round_trip_us = [&](const std::function<void(std::atomic<bool>&, int)>& start) {
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
    };
    rows.push_back({"round trip: raw copy + cuEventRecord, spin cuEventQuery (median)", round_trip_us([&](std::atomic<bool>& done, int i) {
                      copy(i);
                      raw.cuEventRecord(events[0], s.get());
                      while (raw.cuEventQuery(events[0]) == CUDA_ERROR_NOT_READY) {
                      }
                      done = true;
                    })});
    detail::completion_bridge bridge{raw, primary.get(), engine_options{}};
    rows.push_back({"round trip: raw copy + completion_bridge::watch (median)", round_trip_us([&](std::atomic<bool>& done, int i) {
                      copy(i);
                      bridge.watch(s.get(), [&](CUresult) { done.store(true, std::memory_order_release); });
                    })});
    detail::engine_core core{engine_options{}};
    rows.push_back({"round trip: engine core prepare_copy + start (median)", round_trip_us([&](std::atomic<bool>& done, int i) {
                      core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(done)),
                                 core.prepare_copy("engine::poke", small_bytes, 1,
                                                   detail::pinned_side("source", source.data() + i * small_bytes),
                                                   detail::device_side("destination", device_base + i * small_bytes)),
                                 s.get());
                    })});
  }
  for (auto [name, policy] : {std::pair{"engine poke submit (poll)", completion_policy::poll},
                              std::pair{"engine poke submit (blocking_sync)", completion_policy::blocking_sync}}) {
    asio::io_context io(1);
    engine_options engine_options;
    engine_options.policy = policy;
    engine gpu{io.get_executor(), engine_options};
    rows.push_back({name, per_call_us([&](int i) {
                      gpu.poke(host_ptr<const std::uint8_t>(source.get() + i * small_bytes), small_bytes,
                               destination.get() + i * small_bytes, s,
                               [](boost::system::error_code, std::size_t) {});
                    }, [&] {
                      sync();
                      gpu.wait_all(asio::use_future).get();
                      io.restart();
                      io.poll();
                    })});
  }
  {
    // The engine's core without Asio: argument checks alone, then checks + submission + bridge.
    struct no_handler final : detail::completion {
      void complete(boost::system::error_code, std::size_t) override {}
    };
    detail::engine_core core{engine_options{}};
    auto prepare = [&](int i) {
      return core.prepare_copy("engine::poke", small_bytes, 1, detail::pinned_side("source", source.data() + i * small_bytes),
                               detail::device_side("destination", device_base + i * small_bytes));
    };
    rows.push_back({"engine core: prepare_copy (argument checks)", per_call_us([&](int i) { (void)prepare(i); }, nothing)});
    rows.push_back({"engine core: prepare_copy + start", per_call_us([&](int i) {
                      core.start(std::make_shared<detail::operation>(std::make_unique<no_handler>()), prepare(i), s.get());
                    }, [&] {
                      sync();
                      std::promise<void> all_done;
                      core.wait_all(std::make_shared<detail::operation>(std::make_unique<set_on_complete>(all_done)));
                      all_done.get_future().wait();
                    })});
    std::atomic<bool> finished{false};
    rows.push_back({"engine core: prepare_copy + start, alone (median of single calls)", isolated_us([&](int i) {
                      finished = false;
                      core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished)), prepare(i), s.get());
                    }, [&] {
                      while (!finished.load()) {
                      }
                    })});
    // Leave-one-out: the same submission with a transfer whose enqueue does nothing (the engine's own
    // bookkeeping plus the bridge's cuEventRecord), on the caller's stream and on a pool stream.
    auto no_copy = [&](int i) {
      detail::prepared_transfer transfer = prepare(i);
      transfer.batchable = false;
      transfer.enqueue = [](const detail::prepared_transfer&, CUstream) { return CUDA_SUCCESS; };
      return transfer;
    };
    rows.push_back({"engine core: start without the copy, alone (median of single calls)", isolated_us([&](int i) {
                      finished = false;
                      core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished)), no_copy(i), s.get());
                    }, [&] {
                      while (!finished.load()) {
                      }
                    })});
    rows.push_back({"engine core: start without the copy, pool stream, alone (median of single calls)", isolated_us([&](int i) {
                      finished = false;
                      core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished)), no_copy(i), std::nullopt);
                    }, [&] {
                      while (!finished.load()) {
                      }
                    })});
    rows.push_back({"engine core: prepare_copy + start, pool stream, not batched, alone (median of single calls)",
                    isolated_us([&](int i) {
                      finished = false;
                      detail::prepared_transfer transfer = prepare(i);
                      transfer.batchable = false;
                      core.start(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished)), std::move(transfer), std::nullopt);
                    }, [&] {
                      while (!finished.load()) {
                      }
                    })});
    rows.push_back({"operation + completion allocation, alone (median of single calls)", isolated_us([&](int) {
                      auto op = std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished));
                      asm volatile("" : : "r"(op.get()) : "memory");
                    }, nothing)});
    // The bookkeeping's pieces one by one, each a fresh instance beside the engine's.
    {
      detail::completion_bridge bridge{raw, primary.get(), engine_options{}};
      rows.push_back({"completion_bridge::watch (event + hand-off), no-op continuation, alone (median of single calls)",
                      isolated_us([&](int) {
                        finished = false;
                        bridge.watch(s.get(), [&](CUresult) { finished.store(true); });
                      }, [&] {
                        while (!finished.load()) {
                        }
                      })});
      rows.push_back({"completion_bridge::watch, in a loop", per_call_us([&](int) {
                        bridge.watch(s.get(), [](CUresult) {});
                      }, [&] { bridge.drain(); })});
    }
    {
      detail::event_pool pool{raw, CU_EVENT_DISABLE_TIMING};
      rows.push_back({"event_pool acquire + release", per_call_us([&](int) {
                        CUevent event = nullptr;
                        pool.acquire(event);
                        pool.release(event);
                      }, nothing)});
    }
    {
      detail::stream_sequencer sequencer{[](detail::stream_sequencer::submitter next) { next(); }};
      rows.push_back({"stream_sequencer submit + done", per_call_us([&](int) {
                        sequencer.submit(s.get(), [&] { sequencer.done(s.get()); });
                      }, nothing)});
    }
    rows.push_back({"cuEventRecord, alone (median of single calls)", isolated_us([&](int) {
                      raw.cuEventRecord(events[0], s.get());
                    }, [&] {
                      while (raw.cuEventQuery(events[0]) == CUDA_ERROR_NOT_READY) {
                      }
                    })});
    rows.push_back({"cuMemcpyHtoDAsync + cuEventRecord, alone (median of single calls)", isolated_us([&](int i) {
                      copy(i);
                      raw.cuEventRecord(events[0], s.get());
                    }, [&] {
                      while (raw.cuEventQuery(events[0]) == CUDA_ERROR_NOT_READY) {
                      }
                    })});
    rows.push_back({"steady_clock::now", per_call_us([&](int) { (void)clock_type::now(); }, nothing)});
  }
  {
    asio::io_context io(1);
    engine gpu{io.get_executor()};
    rows.push_back({"engine poke submit, pool stream (batched)", per_call_us([&](int i) {
                      gpu.poke(host_ptr<const std::uint8_t>(source.get() + i * small_bytes), small_bytes,
                               destination.get() + i * small_bytes, [](boost::system::error_code, std::size_t) {});
                    }, [&] {
                      gpu.wait_all(asio::use_future).get();
                      io.restart();
                      io.poll();
                    })});
  }
  for (CUevent event : events) raw.cuEventDestroy(event);
  std::cout << "| submit path piece (" << gpu_device.name() << ") | us per call |\n|---|---:|\n";
  for (const row& r : rows) std::cout << "| " << r.name << " | " << r.us << " |\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "submit_path_costs: " << error.what() << "\n";
  return 1;
}
