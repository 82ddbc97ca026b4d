// cuStreamWaitValue32 and cuStreamWriteValue32: stream-ordered waits on, and writes to, a 32-bit word of
// device-accessible memory (device memory, or mapped pinned/registered host memory; never managed).
// The word is accessed atomically, so the host (or another stream) may flip it while a stream polls.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

// Short enough that a released waiter is prompt, long enough not to burn a core per blocked stream.
constexpr auto poll_interval = std::chrono::microseconds(50);

bool satisfied(std::uint32_t current, std::uint32_t value, unsigned condition) {
  switch (condition) {
    case CU_STREAM_WAIT_VALUE_GEQ: return static_cast<std::int32_t>(current - value) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return current == value;
    case CU_STREAM_WAIT_VALUE_AND: return (current & value) != 0;
    default: return ~(current | value) != 0;  // CU_STREAM_WAIT_VALUE_NOR
  }
}

CUresult word_at(CUdeviceptr addr, resolved& out) {
  if (addr % alignof(std::uint32_t) != 0) return CUDA_ERROR_INVALID_VALUE;
  return resolve_device(addr, sizeof(std::uint32_t), out, /*managed_allowed=*/false);
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuStreamWaitValue32(CUstream stream_handle, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  constexpr unsigned condition_bits = 0x3;
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(stream_handle, s));
  FERRY_SIM_TRY(s->owner().sticky());
  if ((flags & ~(condition_bits | CU_STREAM_WAIT_VALUE_FLUSH)) != 0) return CUDA_ERROR_INVALID_VALUE;
  // CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES is 0 on the sim, as on most systems.
  if ((flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  resolved word;
  FERRY_SIM_TRY(word_at(addr, word));
  const unsigned condition = flags & condition_bits;
  context& ctx = s->owner();
  return enqueue(*s, {[word, value, condition, &ctx] {
    std::atomic_ref<std::uint32_t> target(*reinterpret_cast<std::uint32_t*>(word.host));
    while (!satisfied(target.load(std::memory_order_acquire), value, condition)) {
      if (ctx.poisoned()) return;
      std::this_thread::sleep_for(poll_interval);
    }
  }});
}

CUresult cuStreamWriteValue32(CUstream stream_handle, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(stream_handle, s));
  FERRY_SIM_TRY(s->owner().sticky());
  // The v2 entry point takes no flags: it refuses NO_MEMORY_BARRIER, as the driver does.
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  resolved word;
  FERRY_SIM_TRY(word_at(addr, word));
  return enqueue(*s, {[word, value] {
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(word.host))
        .store(value, std::memory_order_release);
  }});
}

}  // namespace ferry::sim::api
