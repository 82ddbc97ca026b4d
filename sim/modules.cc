// Modules and kernels. An image is accepted as it is; a function is the host twin registered under the
// kernel's name, and a launch queues the work the twin makes of its parameters.
#include "sim/modules.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/control.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

struct module;

struct function {
  module* owner;
  std::string name;
  kernel_twin twin;
};

struct module {
  explicit module(context& ctx) : ctx(ctx) {}
  context& ctx;
  std::map<std::string, std::unique_ptr<function>, std::less<>> functions;
};

struct module_registry {
  std::mutex mutex;
  std::unordered_map<const module*, std::unique_ptr<module>> modules;
  std::unordered_set<const function*> functions;
  std::map<std::string, kernel_twin, std::less<>> twins;
};

// Leaked, and reachable from static initializers: kernels/ registers its twins before main.
module_registry& registry() {
  static module_registry* const instance = new module_registry();
  return *instance;
}

// Caller holds the registry lock.
void erase_module(module_registry& r, std::unordered_map<const module*, std::unique_ptr<module>>::iterator it) {
  for (const auto& [name, f] : it->second->functions) r.functions.erase(f.get());
  r.modules.erase(it);
}

// The work of one launch: a twin's failure is the kernel's failure, sticky for its context.
std::function<void()> launched(std::function<void()> work, context& ctx) {
  return [work = std::move(work), &ctx] {
    try {
      if (work) work();
    } catch (const illegal_address&) {
      ctx.poison(CUDA_ERROR_ILLEGAL_ADDRESS);
    } catch (...) {
      ctx.poison(CUDA_ERROR_LAUNCH_FAILED);
    }
  };
}

bool valid_dimensions(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  const bool grid = gx != 0 && gy != 0 && gz != 0 && gy <= 65535 && gz <= 65535;
  const bool block = bx != 0 && by != 0 && bz != 0 && bx <= 1024 && by <= 1024 && bz <= 64 &&
                     static_cast<unsigned long long>(bx) * by * bz <= 1024;
  return grid && block;
}

}  // namespace

void forget_modules_of(const context* ctx) {
  module_registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto it = r.modules.begin(); it != r.modules.end();) {
    auto next = std::next(it);
    if (&it->second->ctx == ctx) erase_module(r, it);
    it = next;
  }
}

std::size_t module_count() {
  module_registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.modules.size();
}

}  // namespace ferry::sim::detail

namespace ferry::sim {

void register_kernel(std::string name, kernel_twin twin) {
  detail::module_registry& r = detail::registry();
  std::lock_guard lock(r.mutex);
  r.twins.insert_or_assign(std::move(name), std::move(twin));
}

void* host_address(CUdeviceptr ptr, std::size_t bytes) {
  detail::resolved range;
  if (detail::resolve_for_kernel(ptr, bytes, range) != CUDA_SUCCESS) {
    throw illegal_address("ferry::sim::host_address: the range is not device-accessible memory");
  }
  // The allocation stays alive for the twin only as long as the application keeps it, as on a GPU.
  return range.host;
}

}  // namespace ferry::sim

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuModuleLoadData(CUmodule* module_out, const void* image) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (module_out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto made = std::make_unique<detail::module>(*ctx);
  module_registry& r = registry();
  std::lock_guard lock(r.mutex);
  *module_out = reinterpret_cast<CUmodule>(made.get());
  r.modules.emplace(made.get(), std::move(made));
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod) {
  module_registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.modules.find(reinterpret_cast<const detail::module*>(hmod));
  if (hmod == nullptr || it == r.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUresult sticky = it->second->ctx.sticky();
  erase_module(r, it);
  return sticky;
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  module_registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.modules.find(reinterpret_cast<const detail::module*>(hmod));
  if (hmod == nullptr || it == r.modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  detail::module& m = *it->second;
  auto known = m.functions.find(name);
  if (known == m.functions.end()) {
    auto twin = r.twins.find(name);
    if (twin == r.twins.end()) return CUDA_ERROR_NOT_FOUND;
    auto made = std::make_unique<detail::function>(detail::function{&m, name, twin->second});
    r.functions.insert(made.get());
    known = m.functions.emplace(name, std::move(made)).first;
  }
  *hfunc = reinterpret_cast<CUfunction>(known->second.get());
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  context* current = nullptr;
  FERRY_SIM_TRY(current_context(current));
  kernel_twin twin;
  context* owner = nullptr;
  {
    module_registry& r = registry();
    std::lock_guard lock(r.mutex);
    const auto* fn = reinterpret_cast<const detail::function*>(f);
    if (f == nullptr || !r.functions.contains(fn)) return CUDA_ERROR_INVALID_HANDLE;
    twin = fn->twin;
    owner = &fn->owner->ctx;
  }
  if (!valid_dimensions(gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Past 48 KiB, dynamic shared memory needs an opt-in attribute the sim does not offer.
  if (sharedMemBytes > 48 * 1024) return CUDA_ERROR_INVALID_VALUE;
  if (kernelParams != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // twins take kernelParams only
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  // A kernel runs in its module's context, so its stream must belong there too.
  if (&s->owner() != owner) return CUDA_ERROR_INVALID_HANDLE;
  FERRY_SIM_TRY(owner->sticky());
  std::function<void()> work;
  try {
    work = twin(kernelParams);
  } catch (const illegal_address&) {
    // The twin looked at memory while reading its parameters: the kernel faults when it runs.
    return enqueue(*s, {[owner] { owner->poison(CUDA_ERROR_ILLEGAL_ADDRESS); }});
  }
  return enqueue(*s, {launched(std::move(work), *owner)});
}

}  // namespace ferry::sim::api
