// The sim's twin of ferry_bench_compute_spin, registered when a program links :sim_twin (with the sim):
// a launch runs every thread's chains on the host, thread by thread, when the stream reaches it, so the
// kernel takes time on the sim as on a GPU and copies can run beside it. It reads its parameter struct
// at launch time and touches memory only through host_address, which throws ferry::sim::illegal_address
// (a faulting kernel) for memory the kernel could not reach.
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "bench/kernels/compute_spin.hpp"
#include "sim/control.hpp"

namespace ferry::bench::kernels {
namespace {

void run(const compute_spin_parameters& p) {
  auto* output = static_cast<std::byte*>(ferry::sim::host_address(p.output, p.threads * sizeof(std::uint32_t)));
  for (std::uint64_t thread = 0; thread < p.threads; ++thread) {
    const std::uint32_t word = spin_word(spin_lane(thread % 32, p.iterations), thread);
    std::memcpy(output + thread * sizeof word, &word, sizeof word);
  }
}

// The kernel takes one parameter, its struct, by value: kernel_params[0] points at it.
std::function<void()> twin(void** kernel_params) {
  if (kernel_params == nullptr || kernel_params[0] == nullptr) {
    // A GPU would read garbage; the sim fails the launch when the stream reaches it (LAUNCH_FAILED).
    return [] { throw std::invalid_argument("ferry_bench_compute_spin twin: launched without kernelParams"); };
  }
  return [p = *static_cast<const compute_spin_parameters*>(kernel_params[0])] { run(p); };
}

// At static initialization (the target is linked whole: BUILD's alwayslink), before any launch can look
// for the twin. The sim's registry is made on first use, so the order of initializers does not matter.
[[maybe_unused]] const bool registered = (ferry::sim::register_kernel("ferry_bench_compute_spin", twin), true);

}  // namespace
}  // namespace ferry::bench::kernels
