// Where batch_path::automatic takes the gather/scatter kernel (ferry_copy_blocks) for a group of copies
// (a batch, a block list, a staged chunk's pieces): enough of them that one launch costs less than the
// copy engine's per-copy work, and small enough on average that the kernel, which gives each copy one
// block of threads, keeps the link busy. A few large copies go by the copy engine, which moves them at the
// link's speed without taking SMs.
#pragma once

#include <cstddef>

namespace ferry::detail {

struct kernel_choice {
  std::size_t min_copies;      // engine_options::batch_kernel_min_copies
  std::size_t max_mean_bytes;  // engine_options::batch_kernel_max_mean_bytes

  // Whether `copies` copies of `bytes` in all suit the kernel.
  bool suits(std::size_t copies, std::size_t bytes) const noexcept {
    if (copies == 0 || copies < min_copies || max_mean_bytes == 0) return false;
    const std::size_t mean = bytes / copies + (bytes % copies != 0 ? 1 : 0);
    return mean <= max_mean_bytes;
  }
};

}  // namespace ferry::detail
