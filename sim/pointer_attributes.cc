// cuPointerGetAttribute(s) over the sim's allocations. Booleans are written as unsigned int, as the
// driver writes them.
#include <cstdint>
#include <cstring>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  allocation_ref a = find_allocation(ptr);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const bool on_device = a->kind == memory_kind::device || a->kind == memory_kind::managed;
  auto answer = [data](auto value) {
    *static_cast<decltype(value)*>(data) = value;
    return CUDA_SUCCESS;
  };
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return answer(a->owner->handle());
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      // Managed memory reports DEVICE, as on the driver.
      return answer(static_cast<unsigned>(on_device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST));
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: {
      context* ctx = nullptr;
      FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
      if (!a->device_accessible()) return CUDA_ERROR_INVALID_VALUE;
      return answer(static_cast<CUdeviceptr>(ptr));
    }
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (a->kind == memory_kind::device) return CUDA_ERROR_INVALID_VALUE;
      return answer(reinterpret_cast<void*>(ptr));
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: return answer(static_cast<unsigned>(a->kind == memory_kind::managed));
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return answer(static_cast<int>(a->owner->device()));
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return answer(static_cast<CUdeviceptr>(a->address));
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: return answer(static_cast<std::size_t>(a->size));
    case CU_POINTER_ATTRIBUTE_MAPPED: return answer(static_cast<unsigned>(a->device_accessible()));
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: return answer(0u);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return answer(static_cast<unsigned long long>(a->id));
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      return answer(static_cast<unsigned>(a->kind == memory_kind::device));
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: return answer(0u);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: return CUDA_ERROR_NOT_SUPPORTED;  // no VMM, pools or RDMA here
  }
  return CUDA_ERROR_INVALID_VALUE;
}

namespace {

// The size of what cuPointerGetAttribute writes for `attribute` (0: not one the sim answers).
std::size_t attribute_bytes(CUpointer_attribute attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: return sizeof(CUcontext);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: return sizeof(CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: return sizeof(void*);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: return sizeof(std::size_t);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: return sizeof(unsigned long long);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return sizeof(int);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: return sizeof(unsigned);
    default: return 0;
  }
}

}  // namespace

// As the driver does, a pointer it does not know is no error: every attribute then reads as zero.
CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  if (count == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < count; ++i) {
    if (data[i] == nullptr || attribute_bytes(attributes[i]) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  const bool known = find_allocation(ptr) != nullptr;
  for (unsigned int i = 0; i < count; ++i) {
    if (!known) {
      std::memset(data[i], 0, attribute_bytes(attributes[i]));
    } else if (CUresult status = api::cuPointerGetAttribute(data[i], attributes[i], ptr); status != CUDA_SUCCESS) {
      return status;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
