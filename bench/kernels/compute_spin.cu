// ferry_bench_compute_spin: a compute kernel that keeps the SMs' FMA units busy and touches memory only
// to write one word per thread, so that bench/kernel_path_cost sees what another kernel's blocks (the
// engine's gather/scatter kernel) cost it in SM time rather than in memory bandwidth.
//
// The launcher gives many waves of short blocks, as a typical compute kernel has: the block scheduler
// then hands an SM that a block leaves to whichever kernel has blocks waiting, so the copy kernel's
// blocks run between the compute kernel's, as they would beside a real workload.
#include <cstdint>

#include "bench/kernels/compute_spin.hpp"

using namespace ferry::bench::kernels;

extern "C" __global__ void __launch_bounds__(spin_block_threads) ferry_bench_compute_spin(compute_spin_parameters p) {
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (thread >= p.threads) return;
  // The block is a whole number of warps, so threadIdx.x % 32 is the lane of `thread` too.
  const float result = spin_lane(threadIdx.x % 32, p.iterations);
  static_cast<std::uint32_t*>(__cvta_global_to_generic(static_cast<std::size_t>(p.output)))[thread] =
      spin_word(result, thread);
}
