// Device memory entry points: allocation, release, free/total memory, and the range around a pointer.
#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/streams.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  return allocate_device(*ctx, bytesize, dptr);
}

CUresult cuMemFree(CUdeviceptr dptr) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
  // A poisoned context still lets go of what it is told to free, so that cleanup after an injected
  // fault leaves nothing behind; the call reports the sticky error all the same.
  // Like the real driver's frees, wait for the context's queued work first: work already on a stream
  // may still read or write the memory.
  if (!ctx->poisoned()) synchronize_context(*ctx);
  const CUresult freed = free_device(dptr);
  return ctx->poisoned() ? ctx->sticky() : freed;
}

CUresult cuMemGetInfo(size_t* free, size_t* total) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total = ferry::sim::default_device_memory;
  *free = ferry::sim::default_device_memory - device_bytes_in_use(ctx->device());
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  allocation_ref a = find_allocation(dptr);
  if (a == nullptr || (a->kind != memory_kind::device && a->kind != memory_kind::managed)) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (pbase != nullptr) *pbase = a->address;
  if (psize != nullptr) *psize = a->size;
  return CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
