// ferry::kernel_module on detail::fatbin_module, the loader ferry's own kernels use. This layer turns
// the loader's statuses into ferry's errors. engine/errors sits in this package's layer, so the error
// family is picked here from the public types (error.hpp) rather than through detail::check.
#include "ferry/kernel_module.hpp"

#include <array>
#include <cstdio>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/fatbin_module.hpp"
#include "ferry/error.hpp"

namespace ferry {
namespace {

[[noreturn]] void throw_error(CUresult status, std::string_view call, const std::string& object,
                              const std::source_location& where) {
  if (status == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(call, object, where);
  if (is_sticky(status)) throw sticky_cuda_error(status, call, object, where);
  throw cuda_error(status, call, object, where);
}

[[noreturn]] void throw_invalid(std::string_view operation, const std::string& what) {
  throw std::invalid_argument(std::string(operation) + ": " + what);
}

std::string hex(const void* handle) {
  char text[2 + 2 * sizeof(void*) + 1];
  std::snprintf(text, sizeof text, "%#zx", reinterpret_cast<std::size_t>(handle));
  return text;
}

}  // namespace

struct kernel_module::state {
  state(std::span<const unsigned char> image, std::span<const char* const> kernels)
      : names(kernels), module(image, kernels) {}

  // The object a failure names: the kernel when the call was about one, else the module by its kernels.
  std::string object(const char* kernel) const {
    if (kernel != nullptr) return std::string("kernel ") + kernel;
    std::string listed = "kernel module of ";
    for (std::size_t i = 0; i < names.size(); ++i) listed += (i == 0 ? "" : ", ") + std::string(names[i]);
    return listed;
  }

  // Kernel `kernel` of the current context (the module loaded there first if need be), and that
  // context's device's resident threads. The loader hands out all of a context's kernels at once; a
  // module of a few kernels takes them on the stack, so that a launch does not allocate.
  CUfunction current(std::size_t kernel, std::uint64_t& resident_threads, const std::source_location& where) {
    std::array<CUfunction, 8> few{};
    std::vector<CUfunction> many;
    if (names.size() > few.size()) many.resize(names.size());
    const std::span<CUfunction> functions =
        many.empty() ? std::span<CUfunction>(few.data(), names.size()) : std::span<CUfunction>(many);
    detail::fatbin_failure failure;
    if (CUresult status = module.current(functions, resident_threads, &failure); status != CUDA_SUCCESS) {
      throw_error(status, failure.call != nullptr ? failure.call : "kernel_module", object(failure.kernel), where);
    }
    return functions[kernel];
  }

  void check_index(std::string_view operation, std::size_t kernel) const {
    if (kernel >= names.size()) {
      throw_invalid(operation, "kernel " + std::to_string(kernel) + " is out of range: the module has " +
                                   std::to_string(names.size()) + " kernel" + (names.size() == 1 ? "" : "s"));
    }
  }

  std::span<const char* const> names;
  detail::fatbin_module module;
};

kernel_module::kernel_module(std::span<const unsigned char> image, std::span<const char* const> kernels) {
  constexpr std::string_view operation = "kernel_module";
  if (image.empty()) throw_invalid(operation, "image is empty");
  if (kernels.empty()) throw_invalid(operation, "kernels is empty: a module needs a kernel to launch");
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i] == nullptr) throw_invalid(operation, "kernels[" + std::to_string(i) + "] is null");
  }
  state_ = std::make_unique<state>(image, kernels);
}

// Frees the bookkeeping only: see the lifetime rule in the header.
kernel_module::~kernel_module() = default;

std::size_t kernel_module::kernel_count() const noexcept { return state_->names.size(); }

CUfunction kernel_module::function(std::size_t kernel, std::source_location where) const {
  state_->check_index("kernel_module::function", kernel);
  std::uint64_t resident_threads = 0;
  return state_->current(kernel, resident_threads, where);
}

void kernel_module::launch(std::size_t kernel, launch_shape shape, void** params, stream_ref stream,
                           std::source_location where) const {
  constexpr std::string_view operation = "kernel_module::launch";
  state_->check_index(operation, kernel);
  const struct {
    const char* name;
    unsigned value;
  } dimensions[] = {{"shape.grid.x", shape.grid.x},   {"shape.grid.y", shape.grid.y},
                    {"shape.grid.z", shape.grid.z},   {"shape.block.x", shape.block.x},
                    {"shape.block.y", shape.block.y}, {"shape.block.z", shape.block.z}};
  for (const auto& dimension : dimensions) {
    if (dimension.value == 0) throw_invalid(operation, std::string(dimension.name) + " is 0");
  }
  std::uint64_t resident_threads = 0;
  const CUfunction function = state_->current(kernel, resident_threads, where);
  const CUresult status = detail::driver().cuLaunchKernel(function, shape.grid.x, shape.grid.y, shape.grid.z,
                                                          shape.block.x, shape.block.y, shape.block.z, 0,
                                                          stream.get(), params, nullptr);
  if (status != CUDA_SUCCESS) {
    throw_error(status, "cuLaunchKernel",
                state_->object(state_->names[kernel]) + " on stream " + hex(stream.get()), where);
  }
}

std::uint64_t kernel_module::resident_threads(std::source_location where) const {
  std::uint64_t resident_threads = 0;
  state_->current(0, resident_threads, where);
  return resident_threads;
}

void kernel_module::unload_current(std::source_location where) {
  detail::fatbin_failure failure;
  if (CUresult status = state_->module.unload_current(&failure); status != CUDA_SUCCESS) {
    throw_error(status, failure.call != nullptr ? failure.call : "kernel_module::unload_current",
                state_->object(nullptr), where);
  }
}

CUresult kernel_module::unload_current_nothrow() noexcept { return state_->module.unload_current(); }

}  // namespace ferry
