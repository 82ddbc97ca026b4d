// Page-locked host memory: cuMemHostAlloc'd buffers and cuMemHostRegister'ed ranges. With unified
// addressing, the device pointer of DEVICEMAP memory is its host address.
#include <cstdint>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/streams.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  return allocate_pinned(*ctx, bytesize, Flags, pp);
}

CUresult cuMemFreeHost(void* p) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
  // Like the real driver's frees, wait for the context's queued work first: work already on a stream
  // may still read or write the memory.
  if (!ctx->poisoned()) synchronize_context(*ctx);
  const CUresult freed = free_pinned(p);
  return ctx->poisoned() ? ctx->sticky() : freed;
}

CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  return register_host(*ctx, p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void* p) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
  if (!ctx->poisoned()) synchronize_context(*ctx);  // as the frees: queued DMA may still use the pages
  const CUresult unregistered = unregister_host(p);
  return ctx->poisoned() ? ctx->sticky() : unregistered;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (pdptr == nullptr || p == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  allocation_ref a = find_allocation(address);
  const bool mapped_host = a != nullptr && (a->kind == memory_kind::pinned || a->kind == memory_kind::registered) &&
                           a->device_accessible();
  if (!mapped_host) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = address;
  return CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
