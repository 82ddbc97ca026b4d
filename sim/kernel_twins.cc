// Each twin reads its parameter struct at launch time (the driver copies kernelParams at launch too) and
// returns the work the stream runs: the host form of the kernel, which turns device addresses into host
// memory only when the stream reaches it, as the GPU would touch the memory only then. host_address
// throws ferry::sim::illegal_address for memory the kernel could not reach, which the sim reports as a
// faulting kernel (sticky CUDA_ERROR_ILLEGAL_ADDRESS).
#include "sim/kernel_twins.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "engine/kernels/host_kernels.hpp"
#include "kernels/parameters.hpp"
#include "sim/control.hpp"
#include "sim/copy_engine.hpp"

namespace ferry::sim::detail {
namespace {

void* to_host(std::uint64_t address, std::uint64_t bytes) { return ferry::sim::host_address(address, bytes); }

// Every kernel takes one parameter, its struct, by value: kernel_params[0] points at it.
template <class Parameters, class Run>
ferry::sim::kernel_twin twin_of(Run run) {
  return [run](void** kernel_params) -> std::function<void()> {
    if (kernel_params == nullptr || kernel_params[0] == nullptr) {
      // A GPU would read garbage; the sim fails the launch when the stream reaches it (LAUNCH_FAILED).
      return [] { throw std::invalid_argument("ferry kernel twin: launched without kernelParams"); };
    }
    return [run, p = *static_cast<const Parameters*>(kernel_params[0])] { run(p); };
  };
}

}  // namespace

void register_kernel_twins() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    ferry::sim::register_kernel("ferry_fill_8", twin_of<ferry::detail::kernels::fill_parameters>(
                                             [](const ferry::detail::kernels::fill_parameters& p) { ferry::detail::host_kernels::fill(8, p, to_host); }));
    ferry::sim::register_kernel("ferry_fill_16", twin_of<ferry::detail::kernels::fill_parameters>([](const ferry::detail::kernels::fill_parameters& p) {
                           ferry::detail::host_kernels::fill(16, p, to_host);
                         }));
    ferry::sim::register_kernel("ferry_fill_2d", twin_of<ferry::detail::kernels::fill_2d_parameters>([](const ferry::detail::kernels::fill_2d_parameters& p) {
                           ferry::detail::host_kernels::fill_2d(p, to_host);
                         }));
    // The copying kernels take the time the sim's bandwidth gives their bytes (set_copy_bandwidth).
    ferry::sim::register_kernel("ferry_copy_blocks",
                         twin_of<ferry::detail::kernels::copy_blocks_parameters>(
                             [](const ferry::detail::kernels::copy_blocks_parameters& p) {
                               const auto began = std::chrono::steady_clock::now();
                               pace_from(began, ferry::detail::host_kernels::copy_blocks(p, to_host));
                             }));
    // The twin waits on the stream's worker thread as the block waits on its SM: it yields at first,
    // then sleeps a little between looks, so that an idle copier leaves the machine's cores to the rest.
    ferry::sim::register_kernel("ferry_resident_copy",
                         twin_of<ferry::detail::kernels::resident_copy_parameters>(
                             [](const ferry::detail::kernels::resident_copy_parameters& p) {
                               ferry::detail::host_kernels::resident_copy(p, to_host, [](std::uint64_t looks) {
                                 if (looks < 1000) {
                                   std::this_thread::yield();
                                 } else {
                                   std::this_thread::sleep_for(std::chrono::microseconds(20));
                                 }
                               }, [](std::uint64_t bytes) { pace_from(std::chrono::steady_clock::now(), bytes); });
                             }));
    ferry::sim::register_kernel("ferry_copy_span",
                         twin_of<ferry::detail::kernels::copy_span_parameters>(
                             [](const ferry::detail::kernels::copy_span_parameters& p) {
                               const auto began = std::chrono::steady_clock::now();
                               ferry::detail::host_kernels::copy_span(p, to_host);
                               pace_from(began, p.bytes);
                             }));
  });
}

}  // namespace ferry::sim::detail
