// Controls of the sim backend that have no driver equivalent: fault injection, stream gates,
// bandwidth throttling and the bookkeeping tests use to prove that nothing leaked.
// Only meaningful when the sim backend is active (ferry::detail::active_backend() == backend_kind::sim).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ferry::sim {

// Makes the `nth` call (1 = the next one) of `entry_point` (an unversioned driver name such as
// "cuMemcpyHtoDAsync") return `status` without doing anything. Counting starts now; one-shot.
// nth == 0 throws std::invalid_argument.
void fail_call(std::string_view entry_point, unsigned nth, CUresult status);

// Makes every allocation (device, pinned, managed, registered) that would take the total of bytes
// allocated from now on past `bytes` fail with CUDA_ERROR_OUT_OF_MEMORY. Stays until reset_faults().
void out_of_memory_after(std::size_t bytes);

// Makes the next operation that `stream` executes fail with `status` and poisons its context: as with
// the real driver's sticky errors, every later call in that context returns `status`, and its pending
// stream work is discarded, until reset_faults(). Stream 0 is the current context's legacy stream.
// Throws std::invalid_argument for a stream the sim does not know.
void fail_stream(CUstream stream, CUresult status = CUDA_ERROR_ILLEGAL_ADDRESS);

// Clears pending injected faults and sticky errors (allocations stay).
void reset_faults();

// Caps the bandwidth of the simulated copy engines and copy kernels (bytes per second; 0 = as fast as
// memcpy), so that pipelining and overlap become observable in tests.
void set_copy_bandwidth(double bytes_per_second);

// The most copies the simulated copy engines had in progress at once (a paced copy counts until its
// pacing ends) since the last reset: a test of overlap reads it rather than timing a loaded machine.
std::size_t copies_in_flight_peak();
void reset_copies_in_flight_peak();

// A host latch placed on a stream: work enqueued on the stream after it does not run until open()
// (or the gate's destruction). Makes "not yet complete" observable without races. Stream 0 is the
// current context's legacy stream; throws std::invalid_argument for a stream the sim does not know.
class gate {
 public:
  explicit gate(CUstream stream);
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;
  ~gate();
  void open() noexcept;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

// How many times each entry point (unversioned name) has been called since the process started;
// fault-injection sweeps diff two snapshots to learn which calls an operation makes.
std::map<std::string, std::size_t> call_counts();

// What the simulated driver holds right now; tests compare before/after to prove nothing leaked.
struct usage {
  std::size_t device_allocations = 0;
  std::size_t device_bytes = 0;
  std::size_t pinned_allocations = 0;
  std::size_t pinned_bytes = 0;
  std::size_t managed_allocations = 0;
  std::size_t registered_ranges = 0;
  std::size_t streams = 0;
  std::size_t events = 0;
  std::size_t contexts = 0;  // created contexts plus retained primary contexts
  std::size_t modules = 0;
  bool operator==(const usage&) const = default;
};
usage current_usage();

// Host twins of kernels: the library's (kernels/, registered by the sim itself) and a program's own,
// which the program registers before it loads them (examples/pipeline_server/kernels:sim_twin does).
// cuModuleGetFunction finds a twin by the kernel's name (in any module: the sim does not look inside
// images), and cuLaunchKernel calls the twin at launch time with the kernelParams array, as the driver
// reads the parameters at launch time: the twin copies every parameter value it needs and returns the
// work the stream runs, in stream order. Device pointers must be turned into host addresses inside that
// work (host_address), when the stream reaches it, as a GPU would.
using kernel_twin = std::function<std::function<void()>(void** kernel_params)>;

// Registers (or replaces) the twin of kernel `name`. Thread-safe, and callable from static initializers.
void register_kernel(std::string name, kernel_twin twin);

// Thrown by host_address, and by twins for any access outside device memory: the launch then fails
// with the sticky CUDA_ERROR_ILLEGAL_ADDRESS, as a faulting kernel does. Any other exception escaping
// a twin's work fails it with CUDA_ERROR_LAUNCH_FAILED.
class illegal_address : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

// The host memory behind [ptr, ptr + bytes) of device-accessible memory (device, managed, or mapped
// pinned/registered host memory). Throws illegal_address when the range is not inside one such
// allocation.
void* host_address(CUdeviceptr ptr, std::size_t bytes);

// Total memory each simulated device reports (cuDeviceTotalMem / cuMemGetInfo), default 16 GiB.
// Allocations past it fail with CUDA_ERROR_OUT_OF_MEMORY.
inline constexpr std::size_t default_device_memory = std::size_t{16} << 30;

}  // namespace ferry::sim
