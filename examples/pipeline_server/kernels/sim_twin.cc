// The sim's twin of ferry_transform_checksum, registered when a program links :sim_twin (with the sim):
// cuModuleGetFunction finds it by the kernel's name in the example's module, as in any module, and a
// launch runs the host form (host_transform.hpp) when the stream reaches it. Like the library's twins,
// it reads its parameter struct at launch time and touches memory only through host_address, which
// throws ferry::sim::illegal_address (a faulting kernel: sticky CUDA_ERROR_ILLEGAL_ADDRESS) for memory
// the kernel could not reach.
#include <cstdint>
#include <functional>
#include <stdexcept>

#include "examples/pipeline_server/kernels/host_transform.hpp"
#include "examples/pipeline_server/kernels/parameters.hpp"
#include "sim/control.hpp"

namespace ferry::pipeline::kernels {
namespace {

void* to_host(std::uint64_t address, std::uint64_t bytes) { return ferry::sim::host_address(address, bytes); }

// The kernel takes one parameter, its struct, by value: kernel_params[0] points at it.
std::function<void()> twin(void** kernel_params) {
  if (kernel_params == nullptr || kernel_params[0] == nullptr) {
    // A GPU would read garbage; the sim fails the launch when the stream reaches it (LAUNCH_FAILED).
    return [] { throw std::invalid_argument("ferry_transform_checksum twin: launched without kernelParams"); };
  }
  return [p = *static_cast<const transform_checksum_parameters*>(kernel_params[0])] { transform_checksum(p, to_host); };
}

// At static initialization (the target is linked whole: BUILD's alwayslink), before any launch can look
// for the twin. The sim's registry is made on first use, so the order of initializers does not matter.
[[maybe_unused]] const bool registered = (ferry::sim::register_kernel("ferry_transform_checksum", twin), true);

}  // namespace
}  // namespace ferry::pipeline::kernels
