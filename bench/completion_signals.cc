// How fast the host can learn that a 4 KiB copy is done, by each signal the driver offers: spinning on
// cuEventQuery (what the raw round trip of bench/engine_latency does), or spinning on a word of mapped
// page-locked memory that cuStreamWriteValue32 writes after the copy; on the submitting thread, and on a
// second thread that then tells the submitter (the completion bridge's hop). A diagnostic for the
// round-trip target: it prints a table of p50 / p99 microseconds and writes no result file.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/ferry.hpp"

using namespace ferry;
using clock_type = std::chrono::steady_clock;
using bench::check;
using bench::percentile;

namespace {

constexpr std::size_t small_bytes = 4096;
constexpr int samples_per_block = 1000;
constexpr int blocks = 3;

// A thread that spins until handed a job, runs it, and says so: the completion bridge's shape.
class watcher {
 public:
  explicit watcher(CUcontext context)
      : thread_([this, context] {
          detail::driver().cuCtxSetCurrent(context);
          while (!stop_.load(std::memory_order_acquire)) {
            if (!armed_.load(std::memory_order_acquire)) continue;
            job_();
            armed_.store(false, std::memory_order_relaxed);
            done_.store(true, std::memory_order_release);
          }
        }) {}
  ~watcher() {
    stop_ = true;
    thread_.join();
  }
  // Hands `job` over and spins until the watcher has run it.
  void run(const std::function<void()>& job) {
    job_ = job;
    done_.store(false, std::memory_order_relaxed);
    armed_.store(true, std::memory_order_release);
    while (!done_.load(std::memory_order_acquire)) {
    }
  }

 private:
  std::function<void()> job_;
  std::atomic<bool> armed_{false}, done_{false}, stop_{false};
  std::thread thread_;
};

}  // namespace

int main() try {
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  context_guard guard(primary);
  const auto& raw = detail::driver();
  std::cerr << "ferry completion_signals on the " << to_string(active_backend()) << " backend: " << gpu_device.name()
            << "\n";
  auto source = pinned_buffer<std::uint8_t>::allocate(small_bytes);
  auto destination = device_buffer<std::uint8_t>::allocate(small_bytes);
  std::mt19937_64 generator(11);
  for (auto& byte : std::span(source.data(), small_bytes)) byte = static_cast<std::uint8_t>(generator());
  stream s = stream::create();
  CUevent event = nullptr;
  check(raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  void* flag_host = nullptr;
  check(raw.cuMemHostAlloc(&flag_host, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  CUdeviceptr flag_device = 0;
  check(raw.cuMemHostGetDevicePointer(&flag_device, flag_host, 0), "cuMemHostGetDevicePointer");
  std::atomic_ref<std::uint32_t> flag(*static_cast<std::uint32_t*>(flag_host));
  flag.store(0);
  std::uint32_t generation = 0;

  auto copy = [&] {
    check(raw.cuMemcpyHtoDAsync(destination.get().get(), source.data(), small_bytes, s.get()), "cuMemcpyHtoDAsync");
  };
  auto record = [&] { check(raw.cuEventRecord(event, s.get()), "cuEventRecord"); };
  // Flags 0: the v2 entry point refuses CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER (CUDA_ERROR_INVALID_VALUE
  // on the H200).
  auto write_flag = [&] {
    check(raw.cuStreamWriteValue32(s.get(), flag_device, ++generation, 0), "cuStreamWriteValue32");
  };
  auto spin_event = [&] {
    CUresult status;
    while ((status = raw.cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {
    }
    check(status, "cuEventQuery");
  };
  auto spin_flag = [&] {
    const std::uint32_t wanted = generation;
    while (flag.load(std::memory_order_acquire) != wanted) {
    }
  };

  watcher other{primary.get()};
  struct variant {
    std::string name;
    std::function<void()> round_trip;
    std::vector<double> samples;
  };
  std::vector<variant> variants = {
      {"copy + cuEventRecord, spin cuEventQuery (raw round trip)", [&] { copy(); record(); spin_event(); }},
      {"copy + cuStreamWriteValue32, spin on the word", [&] { copy(); write_flag(); spin_flag(); }},
      {"copy + cuStreamWriteValue32 + cuEventRecord, spin on the word", [&] { copy(); write_flag(); record(); spin_flag(); }},
      {"copy + cuEventRecord, another thread spins cuEventQuery", [&] { copy(); record(); other.run(spin_event); }},
      {"copy + cuStreamWriteValue32 + cuEventRecord, another thread spins on the word",
       [&] { copy(); write_flag(); record(); other.run(spin_flag); }},
  };
  for (auto& v : variants) {  // warm-up
    for (int i = 0; i < 100; ++i) v.round_trip();
  }
  for (int block = 0; block < blocks; ++block) {
    for (auto& v : variants) {
      for (int i = 0; i < samples_per_block; ++i) {
        const auto start = clock_type::now();
        v.round_trip();
        v.samples.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
      }
      std::vector<std::uint8_t> back(small_bytes);
      check(raw.cuMemcpyDtoH(back.data(), destination.get().get(), small_bytes), "cuMemcpyDtoH");
      if (std::memcmp(back.data(), source.data(), small_bytes) != 0) throw std::runtime_error(v.name + ": data differs");
      check(raw.cuMemsetD8(destination.get().get(), 0xA5, small_bytes), "cuMemsetD8");
    }
  }
  // The submission cost of each signal, alone: 1024 calls, the stream drained between rounds.
  auto per_call_us = [&](const std::function<void()>& body) {
    std::vector<double> rounds;
    for (int round = 0; round < 7; ++round) {
      const auto start = clock_type::now();
      for (int i = 0; i < 1024; ++i) body();
      rounds.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / 1024);
      check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
    }
    return bench::median(rounds);
  };
  const double record_us = per_call_us(record);
  const double write_us = per_call_us([&] { write_flag(); });

  std::cout << "| completion signal (" << gpu_device.name() << ", 4 KiB pinned to device) | p50 us | p99 us |\n"
            << "|---|---:|---:|\n";
  for (auto& v : variants) {
    std::cout << "| " << v.name << " | " << percentile(v.samples, 0.5) << " | " << percentile(v.samples, 0.99)
              << " |\n";
  }
  std::cout << "| cuEventRecord, per call | " << record_us << " | |\n"
            << "| cuStreamWriteValue32, per call | " << write_us << " | |\n";
  raw.cuEventDestroy(event);
  raw.cuMemFreeHost(flag_host);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "completion_signals: " << error.what() << "\n";
  return 1;
}
