// Pitched two-dimensional copies (CUDA_MEMCPY2D) between host, device and unified memory. The whole
// pitched extent of each side, from its first row's start to its last row's end, must lie inside one
// allocation (or be host memory), checked before anything is queued.
#include <cstdint>
#include <cstring>
#include <memory>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/copy_engine.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

struct pitched_copy {
  resolved destination;
  resolved source;
  std::size_t destination_pitch = 0;
  std::size_t source_pitch = 0;
  std::size_t width = 0;
  std::size_t height = 0;

  void operator()() const {
    const engine_run run;
    for (std::size_t row = 0; row < height; ++row) {
      std::memmove(destination.host + row * destination_pitch, source.host + row * source_pitch, width);
    }
    run.pace(width * height);
  }
};

struct side {
  CUmemorytype type;
  const void* host;
  CUdeviceptr device;
  std::size_t x;
  std::size_t y;
  std::size_t pitch;
};

bool known_type(CUmemorytype type) {
  return type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

CUresult resolve_side(const side& s, std::size_t width, std::size_t height, resolved& out) {
  // From the first byte of the first row to the last byte of the last row.
  std::size_t row_offset = 0;
  std::size_t offset = 0;
  std::size_t rows_before_last = 0;
  std::size_t extent = 0;
  if (__builtin_mul_overflow(s.y, s.pitch, &row_offset) || __builtin_add_overflow(row_offset, s.x, &offset) ||
      __builtin_mul_overflow(height - 1, s.pitch, &rows_before_last) ||
      __builtin_add_overflow(rows_before_last, width, &extent)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (s.type) {
    case CU_MEMORYTYPE_HOST:
      if (s.host == nullptr) return CUDA_ERROR_INVALID_VALUE;
      return resolve_host(static_cast<const std::byte*>(s.host) + offset, extent, out);
    case CU_MEMORYTYPE_DEVICE: return resolve_device(s.device + offset, extent, out);
    case CU_MEMORYTYPE_UNIFIED: return resolve_unified(s.device + offset, extent, out);
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

// Fills `copy`; leaves height 0 for a copy of nothing.
CUresult plan(const CUDA_MEMCPY2D* p, pitched_copy& copy) {
  if (p == nullptr || !known_type(p->srcMemoryType) || !known_type(p->dstMemoryType)) return CUDA_ERROR_INVALID_VALUE;
  if (p->WidthInBytes > p->srcPitch || p->WidthInBytes > p->dstPitch) return CUDA_ERROR_INVALID_VALUE;
  if (p->WidthInBytes == 0 || p->Height == 0) return CUDA_SUCCESS;
  const side source{p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcPitch};
  const side destination{p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstPitch};
  FERRY_SIM_TRY(resolve_side(source, p->WidthInBytes, p->Height, copy.source));
  FERRY_SIM_TRY(resolve_side(destination, p->WidthInBytes, p->Height, copy.destination));
  copy.source_pitch = p->srcPitch;
  copy.destination_pitch = p->dstPitch;
  copy.width = p->WidthInBytes;
  copy.height = p->Height;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemcpy2D(const CUDA_MEMCPY2D* pCopy) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  pitched_copy copy;
  FERRY_SIM_TRY(plan(pCopy, copy));
  if (copy.height == 0) return CUDA_SUCCESS;
  return run_synchronously(*ctx, copy);
}

CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(hStream, s));
  pitched_copy copy;
  FERRY_SIM_TRY(plan(pCopy, copy));
  if (copy.height == 0) return CUDA_SUCCESS;
  return enqueue(*s, {std::move(copy)});
}

}  // namespace ferry::sim::api
