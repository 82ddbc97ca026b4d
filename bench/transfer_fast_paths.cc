// transfer_bandwidth's headline transfers of the fast paths, after the size sweep: both directions at
// once, what staging costs the host, a reused pageable buffer, device copies and fills, 2-D, managed
// prefetch.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/harness/run_to_completion.hpp"
#include "bench/harness/statistics.hpp"
#include "bench/harness/test_data.hpp"
#include "bench/transfer_fixture.hpp"

namespace ferry::bench {
namespace {

double process_cpu_seconds() {
  timespec used{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  return used.tv_sec + used.tv_nsec * 1e-9;
}

// What a transfer costs the host: CPU seconds (all of the process's threads) per GB moved, median of
// spec.trials runs of ferry's and of raw's, interleaved. Reported in the harness's "time" convention: the
// ratio raw / ferry is above 1 when ferry spends less CPU per byte.
result host_cost(const comparison_spec& spec) {
  std::vector<double> ferry_cost, raw_cost;
  auto measure = [&](const std::function<void()>& work, std::vector<double>& into, const std::function<void()>& verify) {
    const double before = process_cpu_seconds();
    work();
    into.push_back((process_cpu_seconds() - before) / (spec.bytes * 1e-9));
    verify();
  };
  for (int trial = 0; trial < spec.trials; ++trial) {
    measure(spec.ferry, ferry_cost, spec.verify);
    measure(spec.raw, raw_cost, spec.verify_raw);
  }
  std::cerr << "  " << spec.name << ": ferry " << median(ferry_cost) << ", raw " << median(raw_cost) << " CPU s per GB\n";
  return {spec.name, spec.bytes, median(ferry_cost), median(raw_cost), spec.trials, 1, "CPU s per GB"};
}

}  // namespace

// Poke and peek at once on pool streams, against two raw streams.
std::vector<result> both_directions(transfer_fixture& f) {
  return compare_all({{"bidir_pinned_" + size_name(f.largest), 2 * f.largest, 1, 1, 5,
                       [&f] {
                         run_to_completion([&](auto up_done) {
                           run_to_completion([&](auto down_done) {
                             f.gpu.poke(pinned_span(host_ptr<const std::uint8_t>(f.pinned_in.get()), f.largest),
                                        f.device_out.get(), up_done);
                             f.gpu.peek(f.device_in.get(), pinned_span(f.pinned_out.get(), f.largest), down_done);
                           });
                         });
                       },
                       [&f] {
                         check(f.raw.cuMemcpyHtoDAsync(f.out, f.pinned_in.data(), f.largest, f.raw_stream.get()),
                               "cuMemcpyHtoDAsync");
                         check(f.raw.cuMemcpyDtoHAsync(f.pinned_out.data(), f.in, f.largest, f.raw_stream_2.get()),
                               "cuMemcpyDtoHAsync");
                         f.synchronize(f.raw_stream.get());
                         f.synchronize(f.raw_stream_2.get());
                       },
                       [down = f.verify_host(f.pinned_out.data(), f.largest, "bidir (down)"),
                        up = f.verify_device(f.largest, "bidir (up)")] {
                         down();
                         up();
                       }}});
}

// The threads the engine runs (copiers, workers, the completion bridge) and the CPU time per GB of a
// staged poke and peek of the largest size, against the raw driver's own pageable copies (which stage
// through the driver's buffers on the calling thread).
std::vector<result> staging_host_cost(transfer_fixture& f) {
  const std::string big = size_name(f.largest);
  const std::vector<comparison_spec> table = {
      {"staging_cpu_h2d_pageable_" + big, f.largest, 1, 0, 5,
       [&f] {
         run_to_completion([&](auto done) {
           f.gpu.poke(std::span<const std::uint8_t>(f.pageable_in.data(), f.largest), f.device_out.get(), f.staged, done);
         });
       },
       [&f] { check(f.raw.cuMemcpyHtoD(f.out, f.raw_pageable_in.data(), f.largest), "cuMemcpyHtoD"); },
       f.verify_device(f.largest, "staging_cpu_h2d (ferry)"), {}, f.verify_device(f.largest, "staging_cpu_h2d (raw)")},
      {"staging_cpu_d2h_pageable_" + big, f.largest, 1, 0, 5,
       [&f] {
         run_to_completion([&](auto done) {
           f.gpu.peek(device_ptr<const std::uint8_t>(f.device_in.get()),
                      std::span<std::uint8_t>(f.pageable_out.data(), f.largest), f.staged, done);
         });
       },
       [&f] { check(f.raw.cuMemcpyDtoH(f.raw_pageable_out.data(), f.in, f.largest), "cuMemcpyDtoH"); },
       f.verify_host(f.pageable_out.data(), f.largest, "staging_cpu_d2h (ferry)"), {},
       f.verify_host(f.raw_pageable_out.data(), f.largest, "staging_cpu_d2h (raw)")},
  };
  std::vector<result> results{{"staging_threads", 0, static_cast<double>(f.engine_threads), 1.0, 1, 1, "threads"}};
  for (const comparison_spec& spec : table) results.push_back(host_cost(spec));
  return results;
}

// The same pageable vector poked 10 times: the engine registers it and copies without staging.
std::vector<result> reused_pageable(transfer_fixture& f) {
  return compare_all({{"h2d_pageable_reused_" + size_name(f.largest), 10 * f.largest, 1, 1, 5, repeated(10, [&f](std::size_t) {
                         run_to_completion([&](auto done) {
                           f.gpu.poke(std::span<const std::uint8_t>(f.pageable_in), f.device_out.get(), done);
                         });
                       }),
                       repeated(10, [&f](std::size_t) {
                         check(f.raw.cuMemcpyHtoD(f.out, f.raw_pageable_in.data(), f.largest), "cuMemcpyHtoD");
                       }),
                       f.verify_device(f.largest, "h2d_pageable_reused")}});
}

// Device to device and fills over large buffers (GB/s counts bytes read plus bytes written for copies).
std::vector<result> device_fills_and_copies(transfer_fixture& f) {
  const std::size_t bytes = f.device_copy_bytes, chunk = f.largest, words = bytes / 4;
  device_buffer<std::uint8_t> a = f.gpu.allocate<std::uint8_t>(bytes);
  device_buffer<std::uint8_t> b = f.gpu.allocate<std::uint8_t>(bytes);
  for (std::size_t offset = 0; offset < bytes; offset += chunk) {
    check(f.raw.cuMemcpyHtoD(a.get().get() + offset, f.source.data(), std::min(chunk, bytes - offset)), "cuMemcpyHtoD");
  }
  // Checks, chunk by chunk, that `b` holds what `matches` accepts, then poisons it for the next run.
  auto verify_b = [&f, &b, bytes, chunk](std::function<void(const std::uint8_t*, std::size_t)> matches) {
    return [&f, &b, bytes, chunk, matches = std::move(matches)] {
      std::vector<std::uint8_t> back(chunk);
      for (std::size_t offset = 0; offset < bytes; offset += chunk) {
        const std::size_t n = std::min(chunk, bytes - offset);
        check(f.raw.cuMemcpyDtoH(back.data(), b.get().get() + offset, n), "cuMemcpyDtoH");
        matches(back.data(), n);
      }
      check(f.raw.cuMemsetD8(b.get().get(), 0xA5, bytes), "cuMemsetD8");
    };
  };
  auto filled_with = [&verify_b](auto expected, const char* what) {
    return verify_b([expected, what](const std::uint8_t* data, std::size_t n) {
      for (std::size_t i = 0; i + sizeof(expected) <= n; i += sizeof(expected)) {
        decltype(expected) word;
        std::memcpy(&word, data + i, sizeof(word));
        if (word != expected) throw std::runtime_error(std::string(what) + ": a word differs");
      }
    });
  };
  const std::uint32_t value = 0x9e3779b9u;
  const std::uint64_t wide = 0x0123456789abcdefull;  // ferry's fill kernel, against cuMemsetD32Async
  auto raw_memset32 = [&f, &b, value, words] {
    check(f.raw.cuMemsetD32Async(b.get().get(), value, words, f.raw_stream.get()), "cuMemsetD32Async");
    f.synchronize(f.raw_stream.get());
  };
  return compare_all({
      {"d2d_" + size_name(bytes), 2 * bytes, 1, 1, 5,
       [&] { run_to_completion([&](auto done) { f.gpu.copy(device_ptr<const std::uint8_t>(a.get()), b.get(), bytes, done); }); },
       [&] {
         check(f.raw.cuMemcpyDtoDAsync(b.get().get(), a.get().get(), bytes, f.raw_stream.get()), "cuMemcpyDtoDAsync");
         f.synchronize(f.raw_stream.get());
       },
       verify_b([&f](const std::uint8_t* data, std::size_t n) { require_equal(data, f.source.data(), n, "d2d"); })},
      {"memset32_" + size_name(bytes), bytes, 1, 1, 5,
       [&] { run_to_completion([&](auto done) { f.gpu.memset(b.get().cast<std::uint32_t>(), words, value, done); }); },
       raw_memset32, filled_with(value, "memset32")},
      {"fill64_" + size_name(bytes), bytes, 1, 1, 5,
       [&] { run_to_completion([&](auto done) { f.gpu.memset(b.get().cast<std::uint64_t>(), bytes / 8, wide, done); }); },
       raw_memset32, filled_with(wide, "fill64"), {}, filled_with(value, "memset32")},
  });
}

// 2-D: rows of 16 KiB in a 32 KiB pitch, host (pinned, packed) to device and back.
std::vector<result> pitched_copies(transfer_fixture& f) {
  const std::size_t row = 16 << 10, pitch = 32 << 10, rows = f.sim ? 512 : 8192;
  device_buffer<std::uint8_t> pitched = f.gpu.allocate<std::uint8_t>(pitch * rows);
  stream s = stream::create();
  auto ferry_both_ways = [&] {
    f.gpu.copy_2d(pitched_view(host_ptr<const std::uint8_t>(f.pinned_in.get()), row, row, rows, 0, 0),
                  pitched_view(pitched.get(), pitch, row, rows, 0, 0), s,
                  [](boost::system::error_code error, std::size_t) {
                    if (error) std::cerr << "copy2d_pitched: " << error.message() << "\n";
                  });
    run_to_completion([&](auto done) {
      f.gpu.copy_2d(pitched_view(device_ptr<const std::uint8_t>(pitched.get()), pitch, row, rows, 0, 0),
                    pitched_view(f.pinned_out.get(), row, row, rows, 0, 0), s, done);
    });
  };
  auto raw_2d = [&](bool up) {
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = up ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    copy.srcHost = f.pinned_in.data();
    copy.srcDevice = pitched.get().get();
    copy.srcPitch = up ? row : pitch;
    copy.dstMemoryType = up ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    copy.dstDevice = pitched.get().get();
    copy.dstHost = f.pinned_out.data();
    copy.dstPitch = up ? pitch : row;
    copy.WidthInBytes = row;
    copy.Height = rows;
    check(f.raw.cuMemcpy2DAsync(&copy, s.get()), "cuMemcpy2DAsync");
  };
  auto raw_both_ways = [&] {
    raw_2d(true);
    raw_2d(false);
    f.synchronize(s.get());
  };
  return compare_all({{"copy2d_pitched", 2 * row * rows, 1, 1, 5, ferry_both_ways, raw_both_ways,
                       f.verify_host(f.pinned_out.data(), row * rows, "copy2d_pitched")}});
}

// Managed memory prefetched to the device (moved back to the host, untimed, before each run).
std::vector<result> managed_prefetch(transfer_fixture& f) {
  managed_buffer<std::uint8_t> managed = managed_buffer<std::uint8_t>::allocate(f.largest);
  std::memcpy(managed.host_span().data(), f.source.data(), f.largest);
  stream s = stream::create();
  const CUmemLocation to_device = memory_location::on(f.gpu_device).to_driver();
  const CUmemLocation to_host = memory_location::host().to_driver();
  auto raw_prefetch = [&](const CUmemLocation& to) {
    check(f.raw.cuMemPrefetchAsync(managed.get().get(), f.largest, to, 0, s.get()), "cuMemPrefetchAsync");
    f.synchronize(s.get());
  };
  return compare_all({{"managed_prefetch_" + size_name(f.largest), f.largest, 1, 1, 5,
                       [&] {
                         run_to_completion([&](auto done) {
                           f.gpu.prefetch(managed.get(), f.largest, memory_location::on(f.gpu_device), s, done);
                         });
                       },
                       [&] { raw_prefetch(to_device); },
                       [&] { require_equal(managed.host_span().data(), f.source.data(), f.largest, "managed_prefetch"); },
                       [&] { raw_prefetch(to_host); }}});
}

}  // namespace ferry::bench
