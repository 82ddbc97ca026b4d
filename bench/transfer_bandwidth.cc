// Bandwidth of the engine's transfers against the raw driver, same process, interleaved: the size sweep
// (pinned and pageable, both directions) that the plot shows, and the headline transfers of the fast
// paths (transfer_fast_paths.cc: bidirectional, reused pageable buffers, device copies, memset, 2-D,
// managed prefetch).
#include <algorithm>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/program.hpp"
#include "bench/harness/run_to_completion.hpp"
#include "bench/transfer_fixture.hpp"

using namespace ferry;

namespace ferry::bench {

// One direction of the sweep: ferry's copy of the first `size` bytes and the raw driver's, and where the
// result lands (device_out when no host buffer is named).
struct sweep_case {
  std::string prefix;
  std::function<void(std::size_t size)> ferry;
  std::function<void(std::size_t size)> raw;
  std::uint8_t* ferry_result = nullptr;
  std::uint8_t* raw_result = nullptr;  // the raw side's own buffer, where it differs from ferry's
};

std::vector<sweep_case> sweep_cases(transfer_fixture& f, engine& gpu) {
  return {
      {"h2d_pinned_",
       [&f, &gpu](std::size_t size) {
         run_to_completion([&](auto done) {
           gpu.poke(pinned_span(host_ptr<const std::uint8_t>(f.pinned_in.get()), size), f.device_out.get(), done);
         });
       },
       [&f](std::size_t size) {
         check(f.raw.cuMemcpyHtoDAsync(f.out, f.pinned_in.data(), size, f.raw_stream.get()), "cuMemcpyHtoDAsync");
         f.synchronize(f.raw_stream.get());
       }},
      {"d2h_pinned_",
       [&f, &gpu](std::size_t size) {
         run_to_completion([&](auto done) {
           gpu.peek(f.device_in.get(), pinned_span(f.pinned_out.get(), size), done);
         });
       },
       [&f](std::size_t size) {
         check(f.raw.cuMemcpyDtoHAsync(f.pinned_out.data(), f.in, size, f.raw_stream.get()), "cuMemcpyDtoHAsync");
         f.synchronize(f.raw_stream.get());
       },
       f.pinned_out.data()},
      // As the planner chooses for a buffer seen once (pageable_plan; h2d_pageable_reused measures registration).
      {"h2d_pageable_",
       [&f, &gpu](std::size_t size) {
         run_to_completion([&](auto done) {
           gpu.poke(std::span<const std::uint8_t>(f.pageable_in.data(), size), f.device_out.get(),
                    f.pageable_plan(size), done);
         });
       },
       [&f](std::size_t size) { check(f.raw.cuMemcpyHtoD(f.out, f.raw_pageable_in.data(), size), "cuMemcpyHtoD"); }},
      {"d2h_pageable_",
       [&f, &gpu](std::size_t size) {
         run_to_completion([&](auto done) {
           gpu.peek(device_ptr<const std::uint8_t>(f.device_in.get()),
                      std::span<std::uint8_t>(f.pageable_out.data(), size), f.pageable_plan(size), done);
         });
       },
       [&f](std::size_t size) { check(f.raw.cuMemcpyDtoH(f.raw_pageable_out.data(), f.in, size), "cuMemcpyDtoH"); },
       f.pageable_out.data(), f.raw_pageable_out.data()},
  };
}

// One row of the sweep: `c` moving `size` bytes at a time, at least 8 MiB per run (small transfers are
// repeated) so that timer noise stays small.
comparison_spec sweep_row(transfer_fixture& f, const sweep_case& c, std::size_t size, const std::string& suffix) {
  const std::size_t repeats = std::max<std::size_t>(1, (std::size_t{8} << 20) / size);
  const std::string name = c.prefix + size_name(size) + suffix;
  comparison_spec spec{name, size * repeats, 1, 1, 5,
                       repeated(repeats, [ferry = c.ferry, size](std::size_t) { ferry(size); }),
                       repeated(repeats, [raw = c.raw, size](std::size_t) { raw(size); }),
                       c.ferry_result ? f.verify_host(c.ferry_result, size, name) : f.verify_device(size, name)};
  if (c.raw_result) spec.verify_raw = f.verify_host(c.raw_result, size, name + " (raw)");
  return spec;
}

// Rows of `sizes` of the cases whose prefix `takes` accepts, by `gpu`, each name ending in `suffix`.
void rows_again(transfer_fixture& f, engine& gpu, const std::function<bool(const std::string&)>& takes,
                std::initializer_list<std::size_t> sizes, const std::string& suffix,
                std::vector<comparison_spec>& table) {
  for (std::size_t size : sizes) {
    for (const sweep_case& c : sweep_cases(f, gpu)) {
      if (takes(c.prefix)) table.push_back(sweep_row(f, c, size, suffix));
    }
  }
}

// Every size with the engine's default options; then the page-locked copies the resident copier takes
// (up to 64 KiB) once more, by an engine with engine_options::resident_copies on: rows named *_resident;
// and the pageable pokes the small staging slots take, once more by an engine without them, through the
// driver's own staging (driver_staged, the plan below driver_staged_max_bytes): rows named *_driver_staged;
// and the pageable pokes around driver_staged_max_bytes both ways (*_driver_staged and *_pool); and the
// page-locked copies of 1 and 4 MiB by an engine whose poller's spin never grows (*_fixed_spin).
std::vector<result> size_sweep(transfer_fixture& f) {
  std::vector<comparison_spec> table;
  for (std::size_t size = 4096; size <= f.largest; size *= (size < (1u << 20) ? 16 : 4)) {
    for (const sweep_case& c : sweep_cases(f, f.gpu)) table.push_back(sweep_row(f, c, size, ""));
  }
  engine_options one_at_a_time;
  one_at_a_time.resident_copies = true;
  engine resident{f.io.get_executor(), one_at_a_time};
  const std::initializer_list<std::size_t> small{std::size_t{4096}, std::size_t{64} << 10};
  const auto pinned = [](const std::string& prefix) { return prefix.find("pinned") != std::string::npos; };
  const auto pageable_poke = [](const std::string& prefix) { return prefix == "h2d_pageable_"; };
  rows_again(f, resident, pinned, small, "_resident", table);
  engine_options without_slots;
  without_slots.small_staged_max_bytes = 0;
  engine driver_staging{f.io.get_executor(), without_slots};
  rows_again(f, driver_staging, pageable_poke, small, "_driver_staged", table);
  // Around driver_staged_max_bytes, where the planner switches a poke of pageable memory from the
  // driver's staging to the staging pool: 256 KiB and 1 MiB pokes both ways, the pool's by an engine whose
  // driver_staged_max_bytes is below them.
  const std::initializer_list<std::size_t> around_switch{std::size_t{256} << 10, std::size_t{1} << 20};
  engine_options pool_only;
  pool_only.driver_staged_max_bytes = pool_only.small_staged_max_bytes;
  engine pool_staging{f.io.get_executor(), pool_only};
  rows_again(f, f.gpu, pageable_poke, around_switch, "_driver_staged", table);
  rows_again(f, pool_staging, pageable_poke, around_switch, "_pool", table);
  // The page-locked copies whose trials are two to eight ops, each trial starting after the checks of the
  // run before (at 4 MiB longer than the default spin_window), once more by an engine whose poller's spin
  // after activity never grows (max_spin_window = spin_window): its threads then park between trials.
  const std::initializer_list<std::size_t> few_per_trial{std::size_t{1} << 20, std::size_t{4} << 20};
  engine_options fixed_spin;
  fixed_spin.spin_window = std::chrono::milliseconds(1);
  fixed_spin.max_spin_window = fixed_spin.spin_window;
  engine spin_not_grown{f.io.get_executor(), fixed_spin};
  rows_again(f, spin_not_grown, pinned, few_per_trial, "_fixed_spin", table);
  return compare_all(table);
}

}  // namespace ferry::bench

int main(int argc, char** argv) try {
  const bench::comparison_program program(
      argc, argv,
      "Bandwidth of the engine's transfers against the raw driver: the size sweep and the fast paths\n"
      "(the report goes to <out>/<machine>-transfers.{json,md}).");
  const std::string device_name = program.on.gpu.name();
  std::cerr << "ferry transfer_bandwidth on the " << program.backend << " backend: " << device_name << "\n";

  bench::transfer_fixture fixture(program.on.gpu);
  // In this order: the reused case starts cold, since the sweep's forced staging registered nothing.
  program.report(bench::run_groups(fixture, {bench::size_sweep, bench::both_directions, bench::staging_host_cost,
                                             bench::reused_pageable, bench::device_fills_and_copies,
                                             bench::pitched_copies, bench::managed_prefetch}),
                 "transfers", device_name);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "transfer_bandwidth: " << error.what() << "\n";
  return 1;
}
