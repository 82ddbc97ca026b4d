// cuMemsetD8/D16/D32 and their async forms: fill N elements of device-accessible memory. The
// destination must be aligned to the element size; the range is validated before anything is queued.
#include <cstdint>
#include <cstring>
#include <memory>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

template <class T>
struct fill {
  resolved destination;
  T value{};
  std::size_t count = 0;

  void operator()() const {
    if constexpr (sizeof(T) == 1) {
      std::memset(destination.host, value, count);
    } else {
      for (std::size_t i = 0; i < count; ++i) std::memcpy(destination.host + i * sizeof(T), &value, sizeof(T));
    }
  }
};

// Fills `work`; leaves count 0 for a fill of nothing.
template <class T>
CUresult plan(CUdeviceptr destination, T value, std::size_t count, fill<T>& work) {
  if (destination % sizeof(T) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return CUDA_SUCCESS;
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, sizeof(T), &bytes)) return CUDA_ERROR_INVALID_VALUE;
  FERRY_SIM_TRY(resolve_device(destination, bytes, work.destination));
  work.value = value;
  work.count = count;
  return CUDA_SUCCESS;
}

template <class T>
CUresult fill_now(CUdeviceptr destination, T value, std::size_t count) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  fill<T> work;
  FERRY_SIM_TRY(plan(destination, value, count, work));
  if (work.count == 0) return CUDA_SUCCESS;
  return run_synchronously(*ctx, work);
}

template <class T>
CUresult fill_async(CUdeviceptr destination, T value, std::size_t count, CUstream handle) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(handle, s));
  fill<T> work;
  FERRY_SIM_TRY(plan(destination, value, count, work));
  if (work.count == 0) return CUDA_SUCCESS;
  return enqueue(*s, {std::move(work)});
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N) { return fill_now(dstDevice, uc, N); }

CUresult cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N) { return fill_now(dstDevice, us, N); }

CUresult cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) { return fill_now(dstDevice, ui, N); }

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  return fill_async(dstDevice, uc, N, hStream);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream) {
  return fill_async(dstDevice, us, N, hStream);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
  return fill_async(dstDevice, ui, N, hStream);
}

}  // namespace ferry::sim::api
