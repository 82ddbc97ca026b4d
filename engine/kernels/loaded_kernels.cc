// One module per context, in a process-wide map from context ID to module. The map holds what cannot be
// asked of the driver: whether this context has the kernels yet.
//
// Keyed by cuCtxGetId, not by handle: when a context dies (destroyed, or a primary context whose last
// retain was released) the driver frees its module, and a primary context that comes back keeps its
// handle but gets a new ID, so a dead context's entry is never handed out. Such entries stay in the map
// (a few words each; the module itself is gone with its context); unload_kernels() drops one early.
#include "engine/kernels/loaded_kernels.hpp"

#include <mutex>
#include <new>
#include <unordered_map>

#include "engine/driver/driver_table.hpp"
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
  std::unordered_map<unsigned long long, module_entry> by_context;  // by cuCtxGetId
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
  if (status == CUDA_SUCCESS) {
    status = driver.cuModuleGetFunction(&k.transform_checksum, module, "ferry_transform_checksum");
  }
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

// The ID of the calling thread's current context (CUDA_ERROR_INVALID_CONTEXT when there is none).
CUresult current_context_id(const driver_table& driver, unsigned long long& id) {
  CUcontext context = nullptr;
  if (CUresult status = driver.cuCtxGetCurrent(&context); status != CUDA_SUCCESS) return status;
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return driver.cuCtxGetId(context, &id);
}

}  // namespace

CUresult current_kernels(loaded_kernels& out) noexcept try {
  const driver_table& driver = detail::driver();
  unsigned long long id = 0;
  if (CUresult status = current_context_id(driver, id); status != CUDA_SUCCESS) return status;
  module_map& map = modules();
  std::lock_guard lock(map.mutex);
  if (auto known = map.by_context.find(id); known != map.by_context.end()) {
    out = known->second.kernels;
    return CUDA_SUCCESS;
  }
  // The entry first, so that a failure to allocate it cannot leave a loaded module without one.
  const auto entry = map.by_context.try_emplace(id).first;
  if (CUresult status = load(driver, entry->second); status != CUDA_SUCCESS) {
    map.by_context.erase(entry);
    return status;
  }
  out = entry->second.kernels;
  return CUDA_SUCCESS;
} catch (const std::bad_alloc&) {
  return CUDA_ERROR_OUT_OF_MEMORY;
} catch (...) {
  return CUDA_ERROR_UNKNOWN;  // nothing else is expected to throw here; the caller gets a status
}

CUresult unload_current_kernels() noexcept try {
  const driver_table& driver = detail::driver();
  unsigned long long id = 0;
  if (CUresult status = current_context_id(driver, id); status != CUDA_SUCCESS) return status;
  module_map& map = modules();
  std::lock_guard lock(map.mutex);
  auto known = map.by_context.find(id);
  if (known == map.by_context.end()) return CUDA_SUCCESS;
  const CUmodule module = known->second.module;
  // Forgotten whatever the driver answers: a module that failed to unload (in a context with a sticky
  // error, say) must not be handed out again either.
  map.by_context.erase(known);
  return driver.cuModuleUnload(module);
} catch (...) {
  return CUDA_ERROR_UNKNOWN;  // as above
}

}  // namespace ferry::detail
