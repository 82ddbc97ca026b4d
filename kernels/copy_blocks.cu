// ferry_copy_blocks: many small copies in one launch (gather and scatter are lists of them), where
// one cuMemcpyAsync per block would cost a few microseconds of launch each. ferry_copy_span: one long
// copy moved by the SMs (a peer copy over NVLink, engine::copy_peer's kernel path), the same copy loop
// with the whole grid as its threads.
//
// One block of threads per copied block: the block reads its source, destination and size once (a
// broadcast load), and its threads walk the bytes together, so a warp always touches contiguous memory
// and no block needs to know about any other. Blocks past the grid are taken in a grid-stride loop.
// Within a copied block the accesses are as wide as the two ends allow (copy_width): 16 bytes when the
// source and destination are equally aligned modulo 16, narrower otherwise; the bytes before the first
// aligned address and after the last one go one by one.
#include <cstdint>

#include "kernels/global_memory.cuh"
#include "kernels/layout.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail::kernels {
namespace {

// Four loads are issued before their four stores, so that each thread keeps four loads in flight
// instead of waiting out the latency of one load per store.
template <class Unit>
__device__ __forceinline__ void copy_units(std::uint64_t source, std::uint64_t destination, std::uint64_t units,
                                           std::uint64_t thread, std::uint64_t threads) {
  const Unit* const from = global<const Unit>(source);
  Unit* const to = global<Unit>(destination);
  std::uint64_t i = thread;
  for (; i + 3 * threads < units; i += 4 * threads) {
    const Unit a = from[i];
    const Unit b = from[i + threads];
    const Unit c = from[i + 2 * threads];
    const Unit d = from[i + 3 * threads];
    to[i] = a;
    to[i + threads] = b;
    to[i + 2 * threads] = c;
    to[i + 3 * threads] = d;
  }
  for (; i < units; i += threads) to[i] = from[i];
}

__device__ __forceinline__ void copy_bytes(std::uint64_t source, std::uint64_t destination, std::uint64_t bytes,
                                           std::uint64_t thread, std::uint64_t threads) {
  const std::uint8_t* const from = global<const std::uint8_t>(source);
  std::uint8_t* const to = global<std::uint8_t>(destination);
  for (std::uint64_t k = thread; k < bytes; k += threads) to[k] = from[k];
}

__device__ __forceinline__ void copy_block(std::uint64_t source, std::uint64_t destination, std::uint64_t bytes,
                                           std::uint64_t thread, std::uint64_t threads) {
  const std::uint64_t width = copy_width(source, destination);
  const split parts = split_at_width(destination, bytes, width);
  copy_bytes(source, destination, parts.head, thread, threads);
  const std::uint64_t body = parts.head;
  switch (width) {
    case 16:
      copy_units<ulonglong2>(source + body, destination + body, parts.units, thread, threads);
      break;
    case 8:
      copy_units<unsigned long long>(source + body, destination + body, parts.units, thread, threads);
      break;
    case 4:
      copy_units<unsigned int>(source + body, destination + body, parts.units, thread, threads);
      break;
    case 2:
      copy_units<unsigned short>(source + body, destination + body, parts.units, thread, threads);
      break;
    default:
      copy_units<unsigned char>(source + body, destination + body, parts.units, thread, threads);
      break;
  }
  const std::uint64_t tail = parts.head + width * parts.units;
  copy_bytes(source + tail, destination + tail, parts.tail, thread, threads);
}

}  // namespace
}  // namespace ferry::detail::kernels

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
