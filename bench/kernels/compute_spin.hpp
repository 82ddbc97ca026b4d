// The compute kernel of bench/kernel_path_cost (ferry_bench_compute_spin, compute_spin.cu): its
// parameters and the arithmetic each of its threads does. One definition for the kernel (nvcc), its
// sim twin and the benchmark's check of the output (g++), so that what the GPU computes and what the
// host expects cannot drift apart.
//
// Each thread runs spin_chains independent chains of iterations fused multiply-adds on registers,
// x = fma(x, a, b) with 0 < a < 1: the chains converge towards b / (1 - a) and stay finite and normal,
// so the result needs no special values and fmaf rounds it the same way on the GPU and on the host (one
// correctly rounded IEEE single-precision operation each). Independent chains let a warp issue its next
// FMA while the last one's latency runs out, so the kernel is bound by FMA throughput, not latency.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FERRY_BENCH_HOST_DEVICE __host__ __device__
#else
#define FERRY_BENCH_HOST_DEVICE
#endif

namespace ferry::bench::kernels {

// The kernel's one parameter, by value. Thread t (t < threads) writes output word t; the launcher
// gives at least `threads` threads. Plain 64-bit fields: the same layout under nvcc and g++.
struct compute_spin_parameters {
  std::uint64_t output;      // device address of `threads` 32-bit words, 4-byte aligned
  std::uint64_t threads;
  std::uint64_t iterations;  // FMAs per chain
};

// Threads per block, a whole number of warps; the kernel promises it in __launch_bounds__.
inline constexpr unsigned spin_block_threads = 256;
inline constexpr unsigned spin_chains = 4;

// The chains of a thread depend only on its lane (thread % 32), so that the host checks millions of
// output words by computing 32 chains, not millions.
FERRY_BENCH_HOST_DEVICE inline float spin_lane(std::uint64_t lane, std::uint64_t iterations) {
  float x[spin_chains];
  float a[spin_chains];
  float b[spin_chains];
  for (unsigned k = 0; k < spin_chains; ++k) {
    x[k] = 1.0f + static_cast<float>(lane) * 0.125f + static_cast<float>(k);
    a[k] = 0.9375f - static_cast<float>(lane) * 0.0078125f - static_cast<float>(k) * 0.03125f;
    b[k] = 0.5f + static_cast<float>(k) * 0.25f;
  }
  for (std::uint64_t i = 0; i < iterations; ++i) {
    for (unsigned k = 0; k < spin_chains; ++k) x[k] = fmaf(x[k], a[k], b[k]);
  }
  float sum = 0.0f;
  for (unsigned k = 0; k < spin_chains; ++k) sum += x[k];
  return sum;
}

// Output word `thread`: the bits of its lane's result, xored with the thread's index so that every
// word differs from its neighbours and a word written to the wrong place, or not written, is caught.
FERRY_BENCH_HOST_DEVICE inline std::uint32_t spin_word(float lane_result, std::uint64_t thread) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &lane_result, sizeof bits);
  return bits ^ static_cast<std::uint32_t>(thread);
}

}  // namespace ferry::bench::kernels
