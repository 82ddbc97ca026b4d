// Managed memory: host memory the host may touch directly, which device-side operations also accept.
// Prefetches, advice and stream attachment are validated as the driver does; there is no migration to
// simulate, so the stream-ordered ones are ordering points only.
#include <memory>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/memory_registry.hpp"
#include "sim/runtime.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

CUresult check_location(const CUmemLocation& location) {
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return valid_device(location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult check_managed_range(CUdeviceptr start, std::size_t bytes) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  allocation_ref a = find_allocation(start);
  if (a == nullptr || a->kind != memory_kind::managed || !a->contains(start, bytes)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  return allocate_managed(*ctx, bytesize, flags, dptr);
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                            CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(hStream, s));
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  FERRY_SIM_TRY(check_location(location));
  FERRY_SIM_TRY(check_managed_range(devPtr, count));
  return enqueue(*s, {[] {}});
}

CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location) {
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: break;  // these ignore the location
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: FERRY_SIM_TRY(check_location(location)); break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
      if (location.type != CU_MEM_LOCATION_TYPE_DEVICE && location.type != CU_MEM_LOCATION_TYPE_HOST) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      FERRY_SIM_TRY(check_location(location));
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return check_managed_range(devPtr, count);
}

CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(hStream, s));
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The legacy stream is every stream at once: memory cannot belong to it alone.
  if (flags == CU_MEM_ATTACH_SINGLE && s->type() == stream::kind::legacy) return CUDA_ERROR_INVALID_VALUE;
  allocation_ref a = find_allocation(dptr);
  if (a == nullptr || a->kind != memory_kind::managed || a->address != dptr) return CUDA_ERROR_INVALID_VALUE;
  if (length != 0 && length != a->size) return CUDA_ERROR_INVALID_VALUE;
  return enqueue(*s, {[] {}});
}

}  // namespace ferry::sim::api
