#include "engine/kernels/launch.hpp"

#include "engine/kernels/fatbin_module.hpp"
#include "engine/kernels/kernel_parameters.hpp"
#include "engine/kernels/launch_geometry.hpp"
#include "engine/kernels/loaded_kernels.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail {
namespace {

// Every kernel of kernels/ takes one parameter, its struct, by value.
CUresult launch(CUfunction function, const launch_geometry& shape, void* parameters, CUstream stream) noexcept {
  void* kernel_params[] = {parameters};
  return launch_kernel(function, shape, kernel_params, stream);
}

}  // namespace

CUresult launch_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size, const void* pattern,
                     CUstream stream) noexcept {
  kernels::fill_parameters p{};
  if (CUresult status = make_fill_parameters(destination, count, element_size, pattern, p); status != CUDA_SUCCESS) {
    return status;
  }
  if (count == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(element_size == 8 ? k.fill_8 : k.fill_16, fill_geometry(count * element_size), &p,
                stream);
}

CUresult launch_fill_2d(CUdeviceptr base, std::size_t pitch_bytes, std::size_t width_elements, std::size_t height,
                        std::size_t element_size, const void* pattern, CUstream stream) noexcept {
  kernels::fill_2d_parameters p{};
  if (CUresult status = make_fill_2d_parameters(base, pitch_bytes, width_elements, height, element_size, pattern, p);
      status != CUDA_SUCCESS) {
    return status;
  }
  if (p.row_bytes == 0 || p.height == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(k.fill_2d, fill_2d_geometry(p.row_bytes, p.height, k.resident_threads), &p, stream);
}

CUresult launch_copy_blocks(CUdeviceptr sources, CUdeviceptr destinations, CUdeviceptr sizes, std::size_t count,
                            CUstream stream) noexcept {
  kernels::copy_blocks_parameters p{};
  if (CUresult status = make_copy_blocks_parameters(sources, destinations, sizes, count, p); status != CUDA_SUCCESS) {
    return status;
  }
  if (count == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(k.copy_blocks, copy_blocks_geometry(count), &p, stream);
}

CUresult launch_copy_span(CUdeviceptr source, CUdeviceptr destination, std::size_t bytes, CUstream stream) noexcept {
  kernels::copy_span_parameters p{};
  if (CUresult status = make_copy_span_parameters(source, destination, bytes, p); status != CUDA_SUCCESS) return status;
  if (bytes == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(k.copy_span, copy_span_geometry(bytes, k.resident_threads), &p, stream);
}

CUresult launch_resident_copy(CUdeviceptr ring, std::size_t slots, std::uint64_t first, CUdeviceptr consumed,
                              CUstream stream) noexcept {
  kernels::resident_copy_parameters p{};
  if (CUresult status = make_resident_copy_parameters(ring, slots, first, consumed, p); status != CUDA_SUCCESS) {
    return status;
  }
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(k.resident_copy, resident_copy_geometry(), &p, stream);
}

CUresult unload_kernels() noexcept { return unload_current_kernels(); }

}  // namespace ferry::detail
