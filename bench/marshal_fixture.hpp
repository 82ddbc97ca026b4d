// What marshal_roundtrip's cases move and check: 64 MiB of random words in pageable, pinned and device
// memory, a stream, and the checks that read a run's result back and compare it with the source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/ferry.hpp"

namespace ferry::bench {

inline constexpr std::size_t transfer_bytes = std::size_t{64} << 20;
inline constexpr std::size_t words = transfer_bytes / sizeof(std::uint32_t);

struct marshal_fixture {
  // Needs `primary`, the primary context of `gpu`, current.
  marshal_fixture(device gpu, context_ref primary);

  // Checks that `where` holds the source (read back through pageable_out).
  std::function<void()> verify_device(CUdeviceptr where, std::string what);
  std::function<void()> verify_host(const std::uint32_t* where, std::string what) const;
  void poison_host(std::uint32_t* where) const;
  void poison_device(CUdeviceptr where) const;
  void synchronize() const { check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize"); }
  void synchronize_context() const { check(raw.cuCtxSynchronize(), "cuCtxSynchronize"); }
  // A case that moves transfer_bytes, in the harness's default trials.
  static comparison_spec moving(std::string name, std::function<void()> ferry, std::function<void()> raw,
                                std::function<void()> verify);

  const detail::driver_table& raw = detail::driver();
  device gpu;
  context_ref primary;
  std::vector<std::uint32_t> source_values;
  std::vector<std::uint32_t> pageable_in, pageable_out;
  pinned_buffer<std::uint32_t> pinned_in, pinned_out;
  device_buffer<std::uint32_t> device_a;  // holds the source
  device_buffer<std::uint32_t> device_b;  // written by runs
  stream s = stream::create();
  CUdeviceptr a, b;
  // Created by the peer cases and kept to the end of the run: the cases after them run beside it.
  std::optional<context> second;
};

// The groups of cases, run one after another on one fixture (run_groups): each builds what its cases
// need, runs its table and returns the rows in order.
using marshal_cases = std::vector<result>(marshal_fixture&);
marshal_cases linear_copies, pitched_copies, peer_copies, memsets, allocations, queries, managed_prefetch;

}  // namespace ferry::bench
