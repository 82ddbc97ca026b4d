// Bandwidth of the engine's transfers against the raw driver, same process, interleaved: the size sweep
// (pinned and pageable, both directions) that the plot shows, and the headline transfers of the fast
// paths (bidirectional, reused pageable buffers, device copies, memset, 2-D, managed prefetch).
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/run_to_completion.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

using bench::check;
using bench::median;
using bench::run_to_completion;

std::string size_name(std::size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

void require_equal(const void* a, const void* b, std::size_t bytes, const std::string& what) {
  if (std::memcmp(a, b, bytes) != 0) throw std::runtime_error(what + ": data differs after the run");
}


double process_cpu_seconds() {
  timespec used{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  return used.tv_sec + used.tv_nsec * 1e-9;
}

std::size_t thread_count() {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                                std::filesystem::directory_iterator()));
}

// What a transfer costs the host: CPU seconds (all of the process's threads) per GB moved, median of 5
// runs of ferry's and of raw's, interleaved. Reported in the harness's "time" convention: the ratio
// raw / ferry is above 1 when ferry spends less CPU per byte.
bench::result host_cost(const std::string& name, std::size_t bytes, const std::function<void()>& ferry_run,
                        const std::function<void()>& raw_run, const std::function<void()>& verify_ferry,
                        const std::function<void()>& verify_raw) {
  std::vector<double> ferry_cost, raw_cost;
  auto measure = [&](const std::function<void()>& work, std::vector<double>& into, const std::function<void()>& verify) {
    const double before = process_cpu_seconds();
    work();
    into.push_back((process_cpu_seconds() - before) / (bytes * 1e-9));
    verify();
  };
  for (int trial = 0; trial < 5; ++trial) {
    measure(ferry_run, ferry_cost, verify_ferry);
    measure(raw_run, raw_cost, verify_raw);
  }
  std::cerr << "  " << name << ": ferry " << median(ferry_cost) << ", raw " << median(raw_cost) << " CPU s per GB\n";
  return {name, bytes, median(ferry_cost), median(raw_cost), 5, 1, "CPU s per GB"};
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::options options = bench::parse_options(argc, argv);
  const bool sim = active_backend() == backend::sim;
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  context_guard guard(primary);
  const auto& raw = detail::driver();
  std::cerr << "ferry transfer_bandwidth on the " << to_string(active_backend()) << " backend: " << gpu_device.name() << "\n";

  // The simulation copies with memcpy on two cores: the same runs, smaller.
  const std::size_t largest = sim ? std::size_t{16} << 20 : std::size_t{256} << 20;
  const std::size_t device_copy_bytes = sim ? std::size_t{64} << 20 : std::size_t{4} << 30;

  // The engine's completions run on one io thread; on any exit it is stopped and joined.
  asio::io_context io;
  struct io_runner {
    asio::io_context& io;
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::thread thread{[this] { io.run(); }};
    ~io_runner() {
      work.reset();
      io.stop();
      thread.join();
    }
  } runner{io};
  const std::size_t threads_without_engine = thread_count();
  engine gpu{io.get_executor()};
  const std::size_t engine_threads = thread_count() - threads_without_engine;
  stream raw_stream = stream::create();
  stream raw_stream_2 = stream::create();

  std::vector<std::uint8_t> source(largest);
  std::mt19937_64 generator(11);
  for (std::size_t i = 0; i + 8 <= source.size(); i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(source.data() + i, &word, 8);
  }
  // ferry's pageable buffers and the raw side's are distinct: the engine registers buffers it sees again,
  // and a registration would speed up the raw driver's copies of the same memory too.
  std::vector<std::uint8_t> pageable_in = source, pageable_out(largest);
  std::vector<std::uint8_t> raw_pageable_in = source, raw_pageable_out(largest);
  pinned_buffer<std::uint8_t> pinned_in = pinned_buffer<std::uint8_t>::allocate(largest);
  pinned_buffer<std::uint8_t> pinned_out = pinned_buffer<std::uint8_t>::allocate(largest);
  std::memcpy(pinned_in.data(), source.data(), largest);
  device_buffer<std::uint8_t> device_in = gpu.allocate<std::uint8_t>(largest);   // holds `source`
  device_buffer<std::uint8_t> device_out = gpu.allocate<std::uint8_t>(largest);  // written by runs
  check(raw.cuMemcpyHtoD(device_in.get().get(), source.data(), largest), "cuMemcpyHtoD");
  const CUdeviceptr in = device_in.get().get(), out = device_out.get().get();

  auto verify_device = [&](std::size_t bytes, std::string what) {
    return [&, bytes, what] {
      std::vector<std::uint8_t> back(bytes, 0xA5);
      check(raw.cuMemcpyDtoH(back.data(), out, bytes), "cuMemcpyDtoH");
      require_equal(back.data(), source.data(), bytes, what);
      check(raw.cuMemsetD8(out, 0xA5, bytes), "cuMemsetD8");
    };
  };
  auto verify_host = [&](std::uint8_t* where, std::size_t bytes, std::string what) {
    return [&, where, bytes, what] {
      require_equal(where, source.data(), bytes, what);
      std::memset(where, 0xA5, bytes);
    };
  };

  const transfer_options staged{.plan = transfer_plan::staged};
  // The reused case starts cold: the sweep's forced staging registered nothing.
  std::vector<bench::result> results;
  auto run = [&](bench::comparison_spec spec) { results.push_back(bench::compare(spec)); };

  // The sweep: each run moves at least 8 MiB (small transfers are repeated) so timer noise stays small.
  for (std::size_t size = 4096; size <= largest; size *= (size < (1u << 20) ? 16 : 4)) {
    const std::size_t repeats = std::max<std::size_t>(1, (std::size_t{8} << 20) / size);
    const std::size_t bytes = size * repeats;
    const std::string tag = size_name(size);
    run({"h2d_pinned_" + tag, bytes, 1, 1, 5,
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r)
             run_to_completion([&](auto done) {
               gpu.poke(host_ptr<const std::uint8_t>(pinned_in.get()), size, device_out.get(), done);
             });
         },
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r) {
             check(raw.cuMemcpyHtoDAsync(out, pinned_in.data(), size, raw_stream.get()), "cuMemcpyHtoDAsync");
             check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
           }
         },
         verify_device(size, "h2d_pinned_" + tag)});
    run({"d2h_pinned_" + tag, bytes, 1, 1, 5,
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r)
             run_to_completion([&](auto done) {
               gpu.peek(device_ptr<const std::uint8_t>(device_in.get()), pinned_out.get(), size, done);
             });
         },
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r) {
             check(raw.cuMemcpyDtoHAsync(pinned_out.data(), in, size, raw_stream.get()), "cuMemcpyDtoHAsync");
             check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
           }
         },
         verify_host(pinned_out.data(), size, "d2h_pinned_" + tag)});
    run({"h2d_pageable_" + tag, bytes, 1, 1, 5,
         [&, size, repeats] {
           // Staged, as a buffer seen once would be (the reused case below measures registration).
           for (std::size_t r = 0; r < repeats; ++r)
             run_to_completion([&](auto done) {
               gpu.poke(std::span<const std::uint8_t>(pageable_in.data(), size), device_out.get(), staged, done);
             });
         },
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r) check(raw.cuMemcpyHtoD(out, raw_pageable_in.data(), size), "cuMemcpyHtoD");
         },
         verify_device(size, "h2d_pageable_" + tag)});
    run({"d2h_pageable_" + tag, bytes, 1, 1, 5,
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r)
             run_to_completion([&](auto done) {
               gpu.peek(device_ptr<const std::uint8_t>(device_in.get()), std::span<std::uint8_t>(pageable_out.data(), size),
                        staged, done);
             });
         },
         [&, size, repeats] {
           for (std::size_t r = 0; r < repeats; ++r) check(raw.cuMemcpyDtoH(raw_pageable_out.data(), in, size), "cuMemcpyDtoH");
         },
         verify_host(pageable_out.data(), size, "d2h_pageable (ferry)"), {},
         verify_host(raw_pageable_out.data(), size, "d2h_pageable (raw)")});
  }

  const std::string big = size_name(largest);
  // Both directions at once: poke and peek on pool streams against two raw streams.
  run({"bidir_pinned_" + big, 2 * largest, 1, 1, 5,
       [&] {
         run_to_completion([&](auto up_done) {
           run_to_completion([&](auto down_done) {
             gpu.poke(host_ptr<const std::uint8_t>(pinned_in.get()), largest, device_out.get(), up_done);
             gpu.peek(device_ptr<const std::uint8_t>(device_in.get()), pinned_out.get(), largest, down_done);
           });
         });
       },
       [&] {
         check(raw.cuMemcpyHtoDAsync(out, pinned_in.data(), largest, raw_stream.get()), "cuMemcpyHtoDAsync");
         check(raw.cuMemcpyDtoHAsync(pinned_out.data(), in, largest, raw_stream_2.get()), "cuMemcpyDtoHAsync");
         check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
         check(raw.cuStreamSynchronize(raw_stream_2.get()), "cuStreamSynchronize");
       },
       [&] {
         verify_host(pinned_out.data(), largest, "bidir (down)")();
         verify_device(largest, "bidir (up)")();
       }});

  // What the staging path costs the host: the threads the engine runs (copiers, workers, the completion
  // bridge) and the CPU time per GB of a staged 256 MiB poke and peek, against the raw driver's own
  // pageable copies (which stage through the driver's buffers on the calling thread).
  results.push_back({"staging_threads", 0, static_cast<double>(engine_threads), 1.0, 1, 1, "threads"});
  results.push_back(host_cost("staging_cpu_h2d_pageable_" + big, largest,
      [&] {
        run_to_completion([&](auto done) {
          gpu.poke(std::span<const std::uint8_t>(pageable_in.data(), largest), device_out.get(), staged, done);
        });
      },
      [&] { check(raw.cuMemcpyHtoD(out, raw_pageable_in.data(), largest), "cuMemcpyHtoD"); },
      verify_device(largest, "staging_cpu_h2d (ferry)"), verify_device(largest, "staging_cpu_h2d (raw)")));
  results.push_back(host_cost("staging_cpu_d2h_pageable_" + big, largest,
      [&] {
        run_to_completion([&](auto done) {
          gpu.peek(device_ptr<const std::uint8_t>(device_in.get()),
                   std::span<std::uint8_t>(pageable_out.data(), largest), staged, done);
        });
      },
      [&] { check(raw.cuMemcpyDtoH(raw_pageable_out.data(), in, largest), "cuMemcpyDtoH"); },
      verify_host(pageable_out.data(), largest, "staging_cpu_d2h (ferry)"),
      verify_host(raw_pageable_out.data(), largest, "staging_cpu_d2h (raw)")));

  // The same pageable vector poked 10 times.
  run({"h2d_pageable_reused_" + big, 10 * largest, 1, 1, 5,
       [&] {
         for (int r = 0; r < 10; ++r)
           run_to_completion([&](auto done) {
             gpu.poke(std::span<const std::uint8_t>(pageable_in), device_out.get(), done);
           });
       },
       [&] {
         for (int r = 0; r < 10; ++r) check(raw.cuMemcpyHtoD(out, raw_pageable_in.data(), largest), "cuMemcpyHtoD");
       },
       verify_device(largest, "h2d_pageable_reused")});

  // Device to device and memset over large buffers (GB/s counts bytes read plus bytes written for copies).
  {
    device_buffer<std::uint8_t> a = gpu.allocate<std::uint8_t>(device_copy_bytes);
    device_buffer<std::uint8_t> b = gpu.allocate<std::uint8_t>(device_copy_bytes);
    for (std::size_t offset = 0; offset < device_copy_bytes; offset += largest) {
      check(raw.cuMemcpyHtoD(a.get().get() + offset, source.data(), std::min(largest, device_copy_bytes - offset)),
            "cuMemcpyHtoD");
    }
    auto verify_copy = [&] {
      std::vector<std::uint8_t> back(largest);
      for (std::size_t offset = 0; offset < device_copy_bytes; offset += largest) {
        const std::size_t n = std::min(largest, device_copy_bytes - offset);
        check(raw.cuMemcpyDtoH(back.data(), b.get().get() + offset, n), "cuMemcpyDtoH");
        require_equal(back.data(), source.data(), n, "d2d");
      }
      check(raw.cuMemsetD8(b.get().get(), 0xA5, device_copy_bytes), "cuMemsetD8");
    };
    run({"d2d_" + size_name(device_copy_bytes), 2 * device_copy_bytes, 1, 1, 5,
         [&] { run_to_completion([&](auto done) {
           gpu.copy(device_ptr<const std::uint8_t>(a.get()), b.get(), device_copy_bytes, done);
         }); },
         [&] {
           check(raw.cuMemcpyDtoDAsync(b.get().get(), a.get().get(), device_copy_bytes, raw_stream.get()), "cuMemcpyDtoDAsync");
           check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
         },
         verify_copy});
    const std::size_t words = device_copy_bytes / 4;
    const std::uint32_t value = 0x9e3779b9u;
    // Checks, chunk by chunk, that every word of `b` holds `expected`, then poisons it for the next run.
    auto verify_filled = [&](auto expected, const char* what) {
      return [&, expected, what] {
        std::vector<decltype(expected)> back(largest / sizeof(expected));
        for (std::size_t offset = 0; offset < device_copy_bytes; offset += largest) {
          const std::size_t n = std::min(largest, device_copy_bytes - offset);
          check(raw.cuMemcpyDtoH(back.data(), b.get().get() + offset, n), "cuMemcpyDtoH");
          if (!std::all_of(back.begin(), back.begin() + n / sizeof(expected), [&](auto v) { return v == expected; }))
            throw std::runtime_error(std::string(what) + ": a word differs");
        }
        check(raw.cuMemsetD8(b.get().get(), 0xA5, device_copy_bytes), "cuMemsetD8");
      };
    };
    const auto verify_fill = verify_filled(value, "memset32");
    run({"memset32_" + size_name(device_copy_bytes), device_copy_bytes, 1, 1, 5,
         [&] { run_to_completion([&](auto done) { gpu.memset(b.get().cast<std::uint32_t>(), words, value, done); }); },
         [&] {
           check(raw.cuMemsetD32Async(b.get().get(), value, words, raw_stream.get()), "cuMemsetD32Async");
           check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
         },
         verify_fill});
    // An 8-byte pattern (ferry's fill kernel) against cuMemsetD32Async over the same bytes.
    const std::uint64_t wide = 0x0123456789abcdefull;
    const auto verify_wide = verify_filled(wide, "fill64");
    run({"fill64_" + size_name(device_copy_bytes), device_copy_bytes, 1, 1, 5,
         [&] { run_to_completion([&](auto done) {
           gpu.memset(b.get().cast<std::uint64_t>(), device_copy_bytes / 8, wide, done);
         }); },
         [&] {
           check(raw.cuMemsetD32Async(b.get().get(), value, words, raw_stream.get()), "cuMemsetD32Async");
           check(raw.cuStreamSynchronize(raw_stream.get()), "cuStreamSynchronize");
         },
         verify_wide, {}, verify_fill});
  }

  // 2-D: rows of 16 KiB in a 32 KiB pitch, host (pinned, packed) to device and back.
  {
    const std::size_t row = 16 << 10, pitch = 32 << 10, rows = sim ? 512 : 8192;
    device_buffer<std::uint8_t> pitched = gpu.allocate<std::uint8_t>(pitch * rows);
    stream s = stream::create();
    auto raw_2d = [&](bool up) {
      CUDA_MEMCPY2D copy{};
      copy.srcMemoryType = up ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      copy.srcHost = pinned_in.data();
      copy.srcDevice = pitched.get().get();
      copy.srcPitch = up ? row : pitch;
      copy.dstMemoryType = up ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      copy.dstDevice = pitched.get().get();
      copy.dstHost = pinned_out.data();
      copy.dstPitch = up ? pitch : row;
      copy.WidthInBytes = row;
      copy.Height = rows;
      check(raw.cuMemcpy2DAsync(&copy, s.get()), "cuMemcpy2DAsync");
    };
    run({"copy2d_pitched", 2 * row * rows, 1, 1, 5,
         [&] {
           gpu.copy_2d(row, rows, host_ptr<const std::uint8_t>(pinned_in.get()), row, 0, 0, pitched.get(), pitch, 0, 0, s,
                       [](boost::system::error_code error, std::size_t) {
                         if (error) std::cerr << "copy2d_pitched: " << error.message() << "\n";
                       });
           run_to_completion([&](auto done) {
             gpu.copy_2d(row, rows, device_ptr<const std::uint8_t>(pitched.get()), pitch, 0, 0, pinned_out.get(), row, 0, 0, s, done);
           });
         },
         [&] {
           raw_2d(true);
           raw_2d(false);
           check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
         },
         verify_host(pinned_out.data(), row * rows, "copy2d_pitched")});
  }

  // Managed memory prefetched to the device (moved back to the host, untimed, before each run).
  {
    managed_buffer<std::uint8_t> managed = managed_buffer<std::uint8_t>::allocate(largest);
    std::memcpy(managed.host_span().data(), source.data(), largest);
    stream s = stream::create();
    const CUmemLocation to_device = memory_location::on(gpu_device).to_driver();
    const CUmemLocation to_host = memory_location::host().to_driver();
    run({"managed_prefetch_" + big, largest, 1, 1, 5,
         [&] { run_to_completion([&](auto done) {
           gpu.prefetch(managed.get(), largest, memory_location::on(gpu_device), s, done);
         }); },
         [&] {
           check(raw.cuMemPrefetchAsync(managed.get().get(), largest, to_device, 0, s.get()), "cuMemPrefetchAsync");
           check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
         },
         [&] { require_equal(managed.host_span().data(), source.data(), largest, "managed_prefetch"); },
         [&] {
           check(raw.cuMemPrefetchAsync(managed.get().get(), largest, to_host, 0, s.get()), "cuMemPrefetchAsync");
           check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize");
         }});
  }

  const std::string machine = !options.machine.empty() ? options.machine
                              : sim                    ? std::string("sim")
                              : gpu_device.name().find("H200") != std::string::npos ? std::string("h200")
                                                                                    : std::string("gpu");
  bench::write_report(results, options.out_dir, machine + "-transfers", gpu_device.name(), std::string(to_string(active_backend())));
  return 0;
} catch (const std::exception& error) {
  std::cerr << "transfer_bandwidth: " << error.what() << "\n";
  return 1;
}
