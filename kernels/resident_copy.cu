// ferry_resident_copy: a block that stays on the GPU and copies what the host posts to a ring in mapped
// page-locked memory (parameters.hpp, resident_slot), so that a small copy costs its poster a few stores
// instead of a driver call, and starts as soon as the block reads the entry instead of after the copy
// engine's setup. Thread 0 watches the next slot; the block copies; thread 0 writes the entry's flag.
//
// The block outlives any one copy, so what it reads may have changed since it last read it (the host
// rewrites a slot for every entry, the caller rewrites its buffers between copies). Thread 0's
// system-scope acquire of the entry's sequence, and the barrier after it, order every thread's loads
// after the host's writes that came before the entry was posted (the PTX memory model's causality
// order), so the entry's fields and the copy's bytes are read with plain loads, which the GPU issues
// together (volatile loads of host memory each wait out the link's latency: they made a 4 KiB copy take
// microseconds longer). The word that gives the slot back to the host is written after the copy's
// system-wide fence, with the flag: written earlier, it could reach the host before the loads of the
// slot's fields had returned, and the host would rewrite the slot under them.
#include <cstdint>

#include "kernels/copy_block.cuh"
#include "kernels/global_memory.cuh"
#include "kernels/parameters.hpp"

namespace ferry::detail::kernels {
namespace {

__device__ __forceinline__ std::uint64_t load_acquire_system(const std::uint64_t* word) {
  std::uint64_t value;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(word) : "memory");
  return value;
}

__device__ __forceinline__ void store_release_system(std::uint32_t* word, std::uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(word), "r"(value) : "memory");
}

__device__ __forceinline__ void store_relaxed_system(std::uint64_t* word, std::uint64_t value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(word), "l"(value) : "memory");
}

}  // namespace
}  // namespace ferry::detail::kernels

using namespace ferry::detail::kernels;

extern "C" __global__ void __launch_bounds__(resident_copy_threads) ferry_resident_copy(resident_copy_parameters p) {
  resident_slot* const ring = global<resident_slot>(p.ring);
  std::uint64_t* const consumed = global<std::uint64_t>(p.consumed);
  __shared__ std::uint64_t source, destination, bytes, flag;
  __shared__ std::uint32_t flag_value, kind;
  for (std::uint64_t i = p.first;; ++i) {
    if (threadIdx.x == 0) {
      const resident_slot* const slot = ring + i % p.slots;
      while (load_acquire_system(&slot->sequence) != i + 1) {
      }
      const resident_slot entry = *slot;
      source = entry.source;
      destination = entry.destination;
      bytes = entry.bytes;
      flag = entry.flag;
      flag_value = entry.flag_value;
      kind = entry.kind;
    }
    __syncthreads();
    if (kind == resident_stop) return;
    copy_block(source, destination, bytes, threadIdx.x, blockDim.x);
    // Every thread's stores (and thread 0's loads of the slot) before the words below.
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      store_relaxed_system(consumed, i + 1);  // the slot is the host's again
      store_release_system(global<std::uint32_t>(flag), flag_value);
    }
  }
}
