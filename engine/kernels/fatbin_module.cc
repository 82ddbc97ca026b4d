// One module per context, in a map from context ID to module. The map holds what cannot be asked of the
// driver: whether this context has the module yet.
//
// Keyed by cuCtxGetId, not by handle: when a context dies (destroyed, or a primary context whose last
// retain was released) the driver frees its module, and a primary context that comes back keeps its
// handle but gets a new ID, so a dead context's entry is never handed out. Such entries stay in the map
// (a few words each; the module itself is gone with its context); unload_current() drops one early.
#include "engine/kernels/fatbin_module.hpp"

#include <algorithm>
#include <new>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {
namespace {

// `status`, after noting the failing call in `failure` when it is one.
CUresult noted(CUresult status, const char* call, fatbin_failure& failure, const char* kernel = nullptr) {
  if (status != CUDA_SUCCESS) failure = fatbin_failure{call, kernel};
  return status;
}

// The ID of the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT when there is none).
CUresult current_context_id(const driver_table& driver, unsigned long long& id, fatbin_failure& failure) {
  CUcontext context = nullptr;
  if (CUresult status = driver.cuCtxGetCurrent(&context); status != CUDA_SUCCESS) {
    return noted(status, "cuCtxGetCurrent", failure);
  }
  if (context == nullptr) return noted(CUDA_ERROR_INVALID_CONTEXT, "cuCtxGetCurrent", failure);
  return noted(driver.cuCtxGetId(context, &id), "cuCtxGetId", failure);
}

// SMs x threads per SM of the current context's device.
CUresult resident_threads_of_current(const driver_table& driver, std::uint64_t& threads, fatbin_failure& failure) {
  CUdevice device = 0;
  int multiprocessors = 0;
  int threads_per_multiprocessor = 0;
  CUresult status = noted(driver.cuCtxGetDevice(&device), "cuCtxGetDevice", failure);
  if (status == CUDA_SUCCESS) {
    status = noted(driver.cuDeviceGetAttribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
                   "cuDeviceGetAttribute", failure);
  }
  if (status == CUDA_SUCCESS) {
    status = noted(driver.cuDeviceGetAttribute(&threads_per_multiprocessor,
                                               CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device),
                   "cuDeviceGetAttribute", failure);
  }
  threads = static_cast<std::uint64_t>(multiprocessors > 0 ? multiprocessors : 1) *
            static_cast<std::uint64_t>(threads_per_multiprocessor > 0 ? threads_per_multiprocessor : 1);
  return status;
}

}  // namespace

fatbin_module::fatbin_module(std::span<const unsigned char> image, std::span<const char* const> kernels)
    : image_(image), kernels_(kernels) {}

// The functions' vector first, so that a failure to allocate it cannot leave a loaded module behind.
CUresult fatbin_module::load(loaded& out, fatbin_failure& failure) const {
  const driver_table& driver = detail::driver();
  std::vector<CUfunction> functions(kernels_.size(), nullptr);
  CUmodule module = nullptr;
  if (CUresult status = driver.cuModuleLoadData(&module, image_.data()); status != CUDA_SUCCESS) {
    return noted(status, "cuModuleLoadData", failure);
  }
  CUresult status = CUDA_SUCCESS;
  for (std::size_t i = 0; i < kernels_.size() && status == CUDA_SUCCESS; ++i) {
    status = noted(driver.cuModuleGetFunction(&functions[i], module, kernels_[i]), "cuModuleGetFunction", failure,
                   kernels_[i]);
  }
  std::uint64_t resident_threads = 0;
  if (status == CUDA_SUCCESS) status = resident_threads_of_current(driver, resident_threads, failure);
  if (status != CUDA_SUCCESS) {
    driver.cuModuleUnload(module);
    return status;
  }
  out = loaded{module, std::move(functions), resident_threads};
  return CUDA_SUCCESS;
}

CUresult fatbin_module::current(std::span<CUfunction> functions, std::uint64_t& resident_threads,
                                fatbin_failure* failure) noexcept try {
  fatbin_failure unwanted;
  fatbin_failure& noted_failure = failure != nullptr ? *failure : unwanted;
  noted_failure = fatbin_failure{};
  if (functions.size() != kernels_.size()) return CUDA_ERROR_INVALID_VALUE;
  const driver_table& driver = detail::driver();
  unsigned long long id = 0;
  if (CUresult status = current_context_id(driver, id, noted_failure); status != CUDA_SUCCESS) return status;
  std::lock_guard lock(mutex_);
  auto known = by_context_.find(id);
  if (known == by_context_.end()) {
    // The entry first, so that a failure to allocate it cannot leave a loaded module without one.
    known = by_context_.try_emplace(id).first;
    if (CUresult status = load(known->second, noted_failure); status != CUDA_SUCCESS) {
      by_context_.erase(known);
      return status;
    }
  }
  std::copy(known->second.functions.begin(), known->second.functions.end(), functions.begin());
  resident_threads = known->second.resident_threads;
  return CUDA_SUCCESS;
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;
} catch (...) {
  return CUDA_ERROR_UNKNOWN;  // nothing else is expected to throw here; the caller gets a status
}

CUresult fatbin_module::unload_current(fatbin_failure* failure) noexcept try {
  fatbin_failure unwanted;
  fatbin_failure& noted_failure = failure != nullptr ? *failure : unwanted;
  noted_failure = fatbin_failure{};
  const driver_table& driver = detail::driver();
  unsigned long long id = 0;
  if (CUresult status = current_context_id(driver, id, noted_failure); status != CUDA_SUCCESS) return status;
  std::lock_guard lock(mutex_);
  auto known = by_context_.find(id);
  if (known == by_context_.end()) return CUDA_SUCCESS;
  const CUmodule module = known->second.module;
  // Forgotten whatever the driver answers: a module that failed to unload (in a context with a sticky
  // error, say) must not be handed out again either.
  by_context_.erase(known);
  return noted(driver.cuModuleUnload(module), "cuModuleUnload", noted_failure);
} catch (...) {
  return CUDA_ERROR_UNKNOWN;  // as above
}

CUresult launch_kernel(CUfunction function, const launch_geometry& shape, void** kernel_params,
                       CUstream stream) noexcept try {
  return driver().cuLaunchKernel(function, static_cast<unsigned>(shape.grid_x), static_cast<unsigned>(shape.grid_y), 1,
                                 shape.block_x, shape.block_y, 1, 0, stream, kernel_params, nullptr);
} catch (...) {
  return CUDA_ERROR_NOT_INITIALIZED;  // unreachable once current() succeeded: driver() was chosen
}

}  // namespace ferry::detail
