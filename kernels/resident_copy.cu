// ferry_resident_copy: a block that stays on the GPU and copies what the host posts to a ring in mapped
// page-locked memory (parameters.hpp, resident_slot), so that a small copy costs its poster a few stores
// instead of a driver call, and starts as soon as the block reads the entry instead of after the copy
// engine's setup. The first lanes of warp 0 watch the next slot; the block copies; thread 0 writes the
// entry's flag.
//
// Each look at the slot reads all of its words at once (one lane a word, one read of the line over the
// link), and the entry is taken when every word carries its tag: the look that finds the entry has its
// fields too, where a look at a sequence word and then a read of the fields would wait out the link's
// latency twice. The block outlives any one copy, so what it reads may have changed since it last read
// it (the host rewrites a slot for every entry, the caller rewrites its buffers between copies). The
// system-scope fence after the look that found the entry, and the barrier after it, order every
// thread's loads after the host's writes that came before the entry was posted (a relaxed load that
// reads a released write, then a fence: the PTX memory model's acquire pattern), so the copy's bytes are
// read with plain loads, which the GPU issues together. The word that gives the slot back to the host
// is written after the copy's system-wide fence, with the flag: written earlier, it could reach the host
// before the slot's loads had returned, and the host would rewrite the slot under them.
#include <cstdint>

#include "kernels/copy_block.cuh"
#include "kernels/global_memory.cuh"
#include "kernels/parameters.hpp"

namespace ferry::detail::kernels {
namespace {

__device__ __forceinline__ std::uint64_t load_relaxed_system(const std::uint64_t* word) {
  std::uint64_t value;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(word) : "memory");
  return value;
}

__device__ __forceinline__ void fence_acquire_release_system() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

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
  __shared__ resident_entry entry;
  constexpr unsigned watchers = (1u << resident_slot_words) - 1;  // lanes 0 .. words - 1 of warp 0
  for (std::uint64_t i = p.first;; ++i) {
    if (threadIdx.x < resident_slot_words) {
      const std::uint64_t* const word = &ring[i % p.slots].words[threadIdx.x];
      std::uint64_t value = load_relaxed_system(word);
      while (!__all_sync(watchers, resident_word_of(value, i))) value = load_relaxed_system(word);
      fence_acquire_release_system();
      // Thread 0 alone writes the entry for the block (and reads its flag's fields at the end).
      std::uint64_t words[resident_slot_words];
      for (unsigned k = 0; k < resident_slot_words; ++k) words[k] = __shfl_sync(watchers, value, k);
      if (threadIdx.x == 0) entry = resident_entry_of(words);
    }
    __syncthreads();
    if (entry.kind == resident_stop) return;
    copy_block(entry.source, entry.destination, entry.bytes, threadIdx.x, blockDim.x);
    // Every thread's stores (and the watchers' loads of the slot) before the words below.
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      store_relaxed_system(consumed, i + 1);  // the slot is the host's again
      store_release_system(global<std::uint32_t>(entry.flag), entry.flag_value);
    }
  }
}
