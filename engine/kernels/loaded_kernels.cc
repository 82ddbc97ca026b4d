#include "engine/kernels/loaded_kernels.hpp"

#include <new>

#include "engine/kernels/fatbin_module.hpp"
#include "kernels/fatbin.hpp"

namespace ferry::detail {
namespace {

// In the order of loaded_kernels' functions.
constexpr const char* kernel_names[] = {"ferry_fill_8", "ferry_fill_16", "ferry_fill_2d", "ferry_copy_blocks",
                                       "ferry_copy_span", "ferry_resident_copy"};

// Leaked, as fatbin_module asks: the driver unloads the modules of live contexts at exit.
fatbin_module& library_module() {
  static fatbin_module* const instance = new fatbin_module(kernels::fatbin(), kernel_names);
  return *instance;
}

}  // namespace

CUresult current_kernels(loaded_kernels& out) noexcept try {
  CUfunction functions[std::size(kernel_names)] = {};
  loaded_kernels k;
  if (CUresult status = library_module().current(functions, k.resident_threads); status != CUDA_SUCCESS) {
    return status;
  }
  k.fill_8 = functions[0];
  k.fill_16 = functions[1];
  k.fill_2d = functions[2];
  k.copy_blocks = functions[3];
  k.copy_span = functions[4];
  k.resident_copy = functions[5];
  out = k;
  return CUDA_SUCCESS;
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;  // the module's first use could not allocate it
}

CUresult unload_current_kernels() noexcept try {
  return library_module().unload_current();
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;
}

}  // namespace ferry::detail
