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
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/per_call.hpp"
#include "bench/harness/program.hpp"
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

// A 4 KiB copy and the signals that can follow it on the stream: an event, and a word of mapped
// page-locked memory written by cuStreamWriteValue32 (a new value each time).
class signals {
 public:
  signals() {
    std::mt19937_64 generator(11);
    for (auto& byte : std::span(source_.data(), small_bytes)) byte = static_cast<std::uint8_t>(generator());
    check(raw_.cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(raw_.cuMemHostAlloc(&flag_host_, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    check(raw_.cuMemHostGetDevicePointer(&flag_device_, flag_host_, 0), "cuMemHostGetDevicePointer");
    flag().store(0);
  }
  signals(const signals&) = delete;
  signals& operator=(const signals&) = delete;
  ~signals() {
    raw_.cuEventDestroy(event_);
    raw_.cuMemFreeHost(flag_host_);
  }

  void copy() {
    check(raw_.cuMemcpyHtoDAsync(destination_.get().get(), source_.data(), small_bytes, s_.get()), "cuMemcpyHtoDAsync");
  }
  void record() { check(raw_.cuEventRecord(event_, s_.get()), "cuEventRecord"); }
  // Flags 0: the v2 entry point refuses CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER (CUDA_ERROR_INVALID_VALUE
  // on the H200).
  void write_flag() { check(raw_.cuStreamWriteValue32(s_.get(), flag_device_, ++generation_, 0), "cuStreamWriteValue32"); }
  void spin_event() {
    CUresult status;
    while ((status = raw_.cuEventQuery(event_)) == CUDA_ERROR_NOT_READY) {
    }
    check(status, "cuEventQuery");
  }
  void spin_flag() {
    const std::uint32_t wanted = generation_;
    while (flag().load(std::memory_order_acquire) != wanted) {
    }
  }
  void synchronize() { check(raw_.cuStreamSynchronize(s_.get()), "cuStreamSynchronize"); }
  // Throws unless the copies delivered the source, then poisons the destination.
  void verify(const std::string& what) {
    std::vector<std::uint8_t> back(small_bytes);
    check(raw_.cuMemcpyDtoH(back.data(), destination_.get().get(), small_bytes), "cuMemcpyDtoH");
    if (std::memcmp(back.data(), source_.data(), small_bytes) != 0) throw std::runtime_error(what + ": data differs");
    check(raw_.cuMemsetD8(destination_.get().get(), 0xA5, small_bytes), "cuMemsetD8");
  }

 private:
  std::atomic_ref<std::uint32_t> flag() { return std::atomic_ref<std::uint32_t>(*static_cast<std::uint32_t*>(flag_host_)); }

  const detail::driver_table& raw_ = detail::driver();
  pinned_buffer<std::uint8_t> source_ = pinned_buffer<std::uint8_t>::allocate(small_bytes);
  device_buffer<std::uint8_t> destination_ = device_buffer<std::uint8_t>::allocate(small_bytes);
  stream s_ = stream::create();
  CUevent event_ = nullptr;
  void* flag_host_ = nullptr;
  CUdeviceptr flag_device_ = 0;
  std::uint32_t generation_ = 0;
};

// One way to learn of the copy's completion, and its round trips in microseconds.
struct variant {
  std::string name;
  std::function<void()> round_trip;
  std::vector<double> samples;
};

// A warm-up of every variant, then blocks of samples of each in turn, the data checked after each block.
void sample(std::vector<variant>& variants, signals& on) {
  for (auto& v : variants) {
    for (int i = 0; i < 100; ++i) v.round_trip();
  }
  for (int block = 0; block < blocks; ++block) {
    for (auto& v : variants) {
      for (int i = 0; i < samples_per_block; ++i) {
        const auto start = clock_type::now();
        v.round_trip();
        v.samples.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
      }
      on.verify(v.name);
    }
  }
}

}  // namespace

int main(int argc, char** argv) try {
  bench::parse_no_flags(argc, argv,
                        "How fast the host learns that a 4 KiB copy is done, by each signal the driver offers\n"
                        "(p50 / p99 us; a diagnostic: prints a table, writes no report).");
  const bench::primary_device on;
  std::cerr << "ferry completion_signals on the " << to_string(active_backend()) << " backend: " << on.gpu.name()
            << "\n";
  signals s;
  watcher other{on.primary.get()};
  std::vector<variant> variants = {
      {"copy + cuEventRecord, spin cuEventQuery (raw round trip)", [&] { s.copy(); s.record(); s.spin_event(); }},
      {"copy + cuStreamWriteValue32, spin on the word", [&] { s.copy(); s.write_flag(); s.spin_flag(); }},
      {"copy + cuStreamWriteValue32 + cuEventRecord, spin on the word",
       [&] { s.copy(); s.write_flag(); s.record(); s.spin_flag(); }},
      {"copy + cuEventRecord, another thread spins cuEventQuery",
       [&] { s.copy(); s.record(); other.run([&] { s.spin_event(); }); }},
      {"copy + cuStreamWriteValue32 + cuEventRecord, another thread spins on the word",
       [&] { s.copy(); s.write_flag(); s.record(); other.run([&] { s.spin_flag(); }); }},
  };
  sample(variants, s);
  // The submission cost of each signal, alone: 1024 calls, the stream drained between rounds.
  const auto drain = [&] { s.synchronize(); };
  const double record_us = bench::per_call_us(1024, 7, 0, [&](int) { s.record(); }, drain);
  const double write_us = bench::per_call_us(1024, 7, 0, [&](int) { s.write_flag(); }, drain);

  std::cout << "| completion signal (" << on.gpu.name() << ", 4 KiB pinned to device) | p50 us | p99 us |\n"
            << "|---|---:|---:|\n";
  for (auto& v : variants) {
    std::cout << "| " << v.name << " | " << percentile(v.samples, 0.5) << " | " << percentile(v.samples, 0.99)
              << " |\n";
  }
  std::cout << "| cuEventRecord, per call | " << record_us << " | |\n"
            << "| cuStreamWriteValue32, per call | " << write_us << " | |\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "completion_signals: " << error.what() << "\n";
  return 1;
}
