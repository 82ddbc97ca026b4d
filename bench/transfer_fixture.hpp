// What transfer_bandwidth's cases move and check: random source bytes in pageable, pinned and device
// memory, the engine with its io thread, two raw streams, and the checks that read a run's result back.
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/io_thread.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace ferry::bench {

// The threads of this process (the engine's are counted as the difference it makes).
std::size_t thread_count();

struct transfer_fixture {
  // Needs the primary context of `on` current.
  explicit transfer_fixture(device on);

  // Checks that the first `bytes` of device_out hold the source, then poisons them for the next run.
  std::function<void()> verify_device(std::size_t bytes, std::string what) const;
  // Checks that the first `bytes` at `where` hold the source, then poisons them for the next run.
  std::function<void()> verify_host(std::uint8_t* where, std::size_t bytes, std::string what) const;
  void synchronize(CUstream on) const { check(raw.cuStreamSynchronize(on), "cuStreamSynchronize"); }

  device gpu_device;
  bool sim = active_backend() == backend::sim;
  // The simulation copies with memcpy on two cores: the same runs, smaller.
  std::size_t largest = sim ? std::size_t{16} << 20 : std::size_t{256} << 20;
  std::size_t device_copy_bytes = sim ? std::size_t{64} << 20 : std::size_t{4} << 30;
  const detail::driver_table& raw = detail::driver();

  boost::asio::io_context io;
  io_thread completions{io};
  std::size_t threads_without_engine = thread_count();
  engine gpu{io.get_executor()};
  std::size_t engine_threads = thread_count() - threads_without_engine;
  stream raw_stream = stream::create();
  stream raw_stream_2 = stream::create();

  std::vector<std::uint8_t> source;
  // ferry's pageable buffers and the raw side's are distinct: the engine registers buffers it sees again,
  // and a registration would speed up the raw driver's copies of the same memory too.
  std::vector<std::uint8_t> pageable_in, pageable_out, raw_pageable_in, raw_pageable_out;
  pinned_buffer<std::uint8_t> pinned_in, pinned_out;
  device_buffer<std::uint8_t> device_in;   // holds `source`
  device_buffer<std::uint8_t> device_out;  // written by runs
  CUdeviceptr in, out;
  const transfer_options staged{transfer_plan::staged};
  // The sweep's pageable plan: the planner's choice where it would not register the buffer (it registers
  // buffers of registration_threshold_bytes seen twice, and the sweep reuses one buffer), staged where
  // it would, as for a buffer seen once (h2d_pageable_reused measures registration).
  transfer_options pageable_plan(std::size_t size) const {
    return size < engine_options{}.registration_threshold_bytes ? transfer_options{} : staged;
  }
};

// The groups of cases, run one after another on one fixture (run_groups): each builds what its cases
// need, runs its table and returns the rows in order.
using transfer_cases = std::vector<result>(transfer_fixture&);
transfer_cases size_sweep, both_directions, staging_host_cost, reused_pageable, device_fills_and_copies, pitched_copies, managed_prefetch;

}  // namespace ferry::bench
