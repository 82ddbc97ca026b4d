// The copy loop of ferry's copy kernels (copy_blocks.cu, resident_copy.cu): one range copied by
// `threads` threads together, thread `thread` taking every `threads`-th unit, so that a warp always
// touches contiguous memory. The accesses are as wide as the two ends allow (copy_width): 16 bytes when
// the source and destination are equally aligned modulo 16, narrower otherwise; the bytes before the
// first aligned address and after the last one go one by one. Device code (and host code in
// tests/kernels/device_code_test, through device_on_host.hpp).
#pragma once

#include <cstdint>

#include "kernels/global_memory.cuh"
#include "kernels/layout.hpp"

namespace ferry::detail::kernels {

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

}  // namespace ferry::detail::kernels
