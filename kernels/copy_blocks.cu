// ferry_copy_blocks: many small copies in one launch (gather and scatter are lists of them), where one
// cuMemcpyAsync per block would cost a driver call each, far more than a small block's bytes take.
// ferry_copy_span: one long copy moved by the SMs (a peer copy over NVLink, engine::copy_peer's kernel
// path), the same copy loop with the whole grid as its threads.
//
// One block of threads per copied block: the block reads its source, destination and size once (a
// broadcast load), and its threads walk the bytes together, so a warp always touches contiguous memory
// and no block needs to know about any other. Blocks past the grid are taken in a grid-stride loop.
// Within a copied block the accesses are as wide as the two ends allow (copy_block.cuh).
#include <cstdint>

#include "kernels/copy_block.cuh"
#include "kernels/global_memory.cuh"
#include "kernels/parameters.hpp"

using namespace ferry::detail::kernels;

extern "C" __global__ void __launch_bounds__(copy_block_threads) ferry_copy_blocks(copy_blocks_parameters p) {
  const std::uint64_t* const sources = global<const std::uint64_t>(p.sources);
  const std::uint64_t* const destinations = global<const std::uint64_t>(p.destinations);
  const std::uint64_t* const sizes = global<const std::uint64_t>(p.sizes);
  for (std::uint64_t b = blockIdx.x; b < p.count; b += gridDim.x) {
    copy_block(sources[b], destinations[b], sizes[b], threadIdx.x, blockDim.x);
  }
}

// Every thread of the grid takes every (grid size)-th unit of the span: a warp's accesses stay
// contiguous, and each thread keeps four 16-byte loads in flight, which is what a copy that reads the
// other GPU's memory over the link needs to hide that latency.
extern "C" __global__ void __launch_bounds__(copy_span_threads) ferry_copy_span(copy_span_parameters p) {
  const std::uint64_t threads = std::uint64_t{gridDim.x} * blockDim.x;
  copy_block(p.source, p.destination, p.bytes, std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x, threads);
}
