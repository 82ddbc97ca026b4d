// Just enough of CUDA's device-side names for g++ to compile kernels/*.cu as host code, so that
// device_code_test can run the kernels' own code one thread at a time. That is a faithful run because
// the kernels share nothing between threads (no shared memory, barriers or atomics): any order of their
// threads is one a GPU could pick. Include it before the kernel sources, and nothing of CUDA's with it.
#pragma once

#include <cstddef>
#include <cstdint>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)

struct device_index {
  unsigned x = 0;
  unsigned y = 0;
  unsigned z = 0;
};

// The running thread's coordinates, set by the test before it calls the kernel for that thread.
inline device_index blockIdx;
inline device_index threadIdx;
inline device_index blockDim;
inline device_index gridDim;

struct alignas(16) ulonglong2 {
  unsigned long long x;
  unsigned long long y;
};

inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return ulonglong2{x, y}; }

// Device addresses are host addresses here.
inline void* __cvta_global_to_generic(std::size_t address) { return reinterpret_cast<void*>(address); }
