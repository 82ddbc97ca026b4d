#include "examples/pipeline_server/kernels/transform_kernel.hpp"

#include <algorithm>
#include <limits>
#include <new>
#include <stdexcept>

#include "examples/pipeline_server/kernels/fatbin.hpp"
#include "examples/pipeline_server/kernels/parameters.hpp"
#include "ferry/error.hpp"
#include "ferry/kernel_module.hpp"
#include "ferry/marshal.hpp"

namespace ferry::pipeline::kernels {
namespace {

constexpr const char* kernel_names[] = {"ferry_transform_checksum"};
constexpr std::size_t transform_checksum_kernel = 0;

// Never deleted, as kernel_module asks: the driver unloads the modules of live contexts at exit.
kernel_module& transform_module() {
  static kernel_module* const instance = new kernel_module(fatbin(), kernel_names);
  return *instance;
}

// Whether [start, start + bytes) is a range of addresses: empty, or non-null and not wrapping around.
bool addressable(std::uint64_t start, std::uint64_t bytes) {
  return bytes == 0 || (start != 0 && bytes <= std::numeric_limits<std::uint64_t>::max() - start);
}

CUresult make_parameters(CUdeviceptr data, std::size_t bytes, CUdeviceptr checksum, std::uint64_t mode,
                         transform_checksum_parameters& out) {
  if (mode != transform_in_place && mode != checksum_only) return CUDA_ERROR_INVALID_VALUE;
  // The kernel adds to the checksum with a 64-bit atomic and loads the data 16 bytes at a time.
  if (checksum == 0 || checksum % 8 != 0 || !addressable(checksum, 8)) return CUDA_ERROR_INVALID_VALUE;
  if (data % 16 != 0 || !addressable(data, bytes)) return CUDA_ERROR_INVALID_VALUE;
  out = transform_checksum_parameters{data, bytes, checksum, mode};
  return CUDA_SUCCESS;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// One wave of blocks at most, as ferry's fills: the threads walk the 16-byte units (plus one for a
// partial last unit) in a grid-stride loop, so more blocks would only queue behind the first wave.
launch_shape shape(std::uint64_t bytes, std::uint64_t resident_threads) {
  static_assert(transform_block_threads % 32 == 0, "the kernel's warp shuffles need whole warps");
  const std::uint64_t wave = std::max<std::uint64_t>(1, resident_threads / transform_block_threads);
  const std::uint64_t blocks = std::min(ceil_div(bytes / 16 + 1, transform_block_threads), wave);
  // A wave's blocks fit in unsigned: a device keeps far fewer than 2^32 threads resident.
  return launch_shape{{static_cast<unsigned>(blocks)}, {transform_block_threads}};
}

// The kernel adds to the word: it must start from zero, in stream order before the kernel. Two 32-bit
// words, which ferry's memset writes with the driver's own memset (cuMemsetD32Async).
CUresult zero_checksum(CUdeviceptr checksum, stream_ref stream) noexcept try {
  memset_async(device_ptr<std::uint32_t>(checksum), 2, std::uint32_t{0}, stream);
  return CUDA_SUCCESS;
} catch (const cuda_error& error) {
  return error.status();
} catch (const std::invalid_argument&) {
  return CUDA_ERROR_INVALID_VALUE;  // memory the driver does not know
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;
} catch (...) {
  return CUDA_ERROR_UNKNOWN;
}

}  // namespace

// The server's callers take statuses: the module's errors become the status they carry. (Loading
// comes first, so that no context or a module that cannot load fails before the checksum is touched.)
CUresult launch_transform_checksum(CUdeviceptr data, std::size_t bytes, CUdeviceptr checksum, std::uint64_t mode,
                                   stream_ref stream) noexcept try {
  transform_checksum_parameters p{};
  if (CUresult status = make_parameters(data, bytes, checksum, mode, p); status != CUDA_SUCCESS) return status;
  const std::uint64_t resident_threads = transform_module().resident_threads();
  if (CUresult status = zero_checksum(checksum, stream); status != CUDA_SUCCESS) return status;
  if (bytes == 0) return CUDA_SUCCESS;
  void* kernel_params[] = {&p};
  transform_module().launch(transform_checksum_kernel, shape(bytes, resident_threads), kernel_params, stream);
  return CUDA_SUCCESS;
} catch (const cuda_error& error) {
  return error.status();
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;  // the module's first use could not allocate it, or the driver's
} catch (...) {
  return CUDA_ERROR_UNKNOWN;  // an invalid_argument cannot come: the kernel and shape are the launcher's
}

CUresult unload_transform_kernel() noexcept {
  try {
    return transform_module().unload_current_nothrow();
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;  // the module's first use could not allocate it
  }
}

}  // namespace ferry::pipeline::kernels
