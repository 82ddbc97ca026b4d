// One module per context, in a process-wide map from context to module. The map holds what cannot be
// asked of the driver: whether this context has the kernels yet.
//
// Why the module stays until unload_kernels() rather than being unloaded by something automatic: the
// driver table offers no way to learn that a context died (a destroyed context, or a primary context
// whose last retain was released). The driver then frees the module itself, but the map cannot see it;
// and a primary context that comes back has the same handle, so the map would hand out functions of a
// module that no longer exists. Whoever ends a context it launched kernels in (a test fixture, the owner
// of an engine) calls unload_kernels() first. Keying by a context ID (cuCtxGetId) would remove that
// rule, but the driver table does not carry that entry point.
#include "engine/kernels/loaded_kernels.hpp"

#include <mutex>
#include <new>
#include <unordered_map>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/twins.hpp"
#include "kernels/fatbin.hpp"

namespace ferry::detail {
namespace {

struct module_entry {
  CUmodule module = nullptr;
  loaded_kernels kernels;
};

struct module_map {
  // Held while a context's module loads: a first launch waits for another thread's load of the same
  // module instead of loading a second one. Loads are rare (once per context), launches only look up.
  std::mutex mutex;
  std::unordered_map<CUcontext, module_entry> by_context;
};

// Leaked: at exit the driver unloads the modules of live contexts with the contexts, and a static
// destructor that unloaded them would race the driver's own teardown.
module_map& modules() {
  static module_map* const instance = new module_map();
  return *instance;
}

CUresult load(const driver_table& driver, module_entry& out) {
  CUmodule module = nullptr;
  if (CUresult status = driver.cuModuleLoadData(&module, kernels::fatbin().data()); status != CUDA_SUCCESS) {
    return status;
  }
  loaded_kernels k;
  CUdevice device = 0;
  int multiprocessors = 0;
  int threads_per_multiprocessor = 0;
  CUresult status = driver.cuModuleGetFunction(&k.fill_8, module, "ferry_fill_8");
  if (status == CUDA_SUCCESS) status = driver.cuModuleGetFunction(&k.fill_16, module, "ferry_fill_16");
  if (status == CUDA_SUCCESS) status = driver.cuModuleGetFunction(&k.fill_2d, module, "ferry_fill_2d");
  if (status == CUDA_SUCCESS) status = driver.cuModuleGetFunction(&k.copy_blocks, module, "ferry_copy_blocks");
  if (status == CUDA_SUCCESS) status = driver.cuCtxGetDevice(&device);
  if (status == CUDA_SUCCESS) {
    status = driver.cuDeviceGetAttribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  }
  if (status == CUDA_SUCCESS) {
    status = driver.cuDeviceGetAttribute(&threads_per_multiprocessor,
                                         CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device);
  }
  if (status != CUDA_SUCCESS) {
    driver.cuModuleUnload(module);
    return status;
  }
  k.resident_threads = static_cast<std::uint64_t>(multiprocessors > 0 ? multiprocessors : 1) *
                       static_cast<std::uint64_t>(threads_per_multiprocessor > 0 ? threads_per_multiprocessor : 1);
  out = module_entry{module, k};
  return CUDA_SUCCESS;
}

}  // namespace

CUresult current_kernels(loaded_kernels& out) noexcept try {
  const driver_table& driver = detail::driver();
  CUcontext context = nullptr;
  if (CUresult status = driver.cuCtxGetCurrent(&context); status != CUDA_SUCCESS) return status;
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  module_map& map = modules();
  std::lock_guard lock(map.mutex);
  if (auto known = map.by_context.find(context); known != map.by_context.end()) {
    out = known->second.kernels;
    return CUDA_SUCCESS;
  }
  // The sim finds a kernel's twin by name when the module is asked for the function.
  if (active_backend() == backend_kind::sim) register_twins();
  // The entry first, so that a failure to allocate it cannot leave a loaded module without one.
  const auto entry = map.by_context.try_emplace(context).first;
  if (CUresult status = load(driver, entry->second); status != CUDA_SUCCESS) {
    map.by_context.erase(entry);
    return status;
  }
  out = entry->second.kernels;
  return CUDA_SUCCESS;
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;
} catch (...) {
  // driver() throws when no backend can be used (FERRY_BACKEND=cuda without a GPU).
  return CUDA_ERROR_NOT_INITIALIZED;
}

CUresult unload_current_kernels() noexcept try {
  const driver_table& driver = detail::driver();
  CUcontext context = nullptr;
  if (CUresult status = driver.cuCtxGetCurrent(&context); status != CUDA_SUCCESS) return status;
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  module_map& map = modules();
  std::lock_guard lock(map.mutex);
  auto known = map.by_context.find(context);
  if (known == map.by_context.end()) return CUDA_SUCCESS;
  const CUmodule module = known->second.module;
  // Forgotten whatever the driver answers: a module that failed to unload (in a context with a sticky
  // error, say) must not be handed out again either.
  map.by_context.erase(known);
  return driver.cuModuleUnload(module);
} catch (...) {
  return CUDA_ERROR_NOT_INITIALIZED;
}

}  // namespace ferry::detail
