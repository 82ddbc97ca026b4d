// The driver entry points ferry calls: one list, used to declare the table, to load it from
// libcuda.so.1 and to fill it from the simulation. Each entry keeps the driver's own signature
// (decltype of the declaration in cuda.h), so engine code reads like plain driver-API code.
#pragma once

#include <cuda.h>

#if CUDA_VERSION < 12080
#error "ferry needs the CUDA 12.8 (or newer) headers"
#endif

// X(name): `name` is the API name as written in code (cuda.h maps it to its current ABI version, e.g.
// cuMemAlloc -> cuMemAlloc_v2); #name is the unversioned symbol cuGetProcAddress resolves.
#define FERRY_DRIVER_ENTRY_POINTS(X) \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetCount)                \
  X(cuDeviceGetName)                 \
  X(cuDeviceGetAttribute)            \
  X(cuDeviceTotalMem)                \
  X(cuDeviceCanAccessPeer)           \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxCreate)                     \
  X(cuCtxDestroy)                    \
  X(cuCtxGetCurrent)                 \
  X(cuCtxSetCurrent)                 \
  X(cuCtxPushCurrent)                \
  X(cuCtxPopCurrent)                 \
  X(cuCtxGetDevice)                  \
  X(cuCtxSynchronize)                \
  X(cuCtxEnablePeerAccess)           \
  X(cuCtxDisablePeerAccess)          \
  X(cuMemGetInfo)                    \
  X(cuMemAlloc)                      \
  X(cuMemFree)                       \
  X(cuMemAllocManaged)               \
  X(cuMemHostAlloc)                  \
  X(cuMemFreeHost)                   \
  X(cuMemHostRegister)               \
  X(cuMemHostUnregister)             \
  X(cuMemHostGetDevicePointer)       \
  X(cuMemGetAddressRange)            \
  X(cuPointerGetAttribute)           \
  X(cuMemcpyHtoD)                    \
  X(cuMemcpyDtoH)                    \
  X(cuMemcpyDtoD)                    \
  X(cuMemcpyHtoDAsync)               \
  X(cuMemcpyDtoHAsync)               \
  X(cuMemcpyDtoDAsync)               \
  X(cuMemcpy2D)                      \
  X(cuMemcpy2DAsync)                 \
  X(cuMemcpyPeer)                    \
  X(cuMemcpyPeerAsync)               \
  X(cuMemcpyBatchAsync)              \
  X(cuMemsetD8)                      \
  X(cuMemsetD16)                     \
  X(cuMemsetD32)                     \
  X(cuMemsetD8Async)                 \
  X(cuMemsetD16Async)                \
  X(cuMemsetD32Async)                \
  X(cuMemPrefetchAsync)              \
  X(cuMemAdvise)                     \
  X(cuStreamAttachMemAsync)          \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy)                 \
  X(cuStreamSynchronize)             \
  X(cuStreamQuery)                   \
  X(cuStreamWaitEvent)               \
  X(cuStreamWaitValue32)             \
  X(cuStreamWriteValue32)            \
  X(cuLaunchHostFunc)                \
  X(cuEventCreate)                   \
  X(cuEventDestroy)                  \
  X(cuEventRecord)                   \
  X(cuEventQuery)                    \
  X(cuEventSynchronize)              \
  X(cuEventElapsedTime)              \
  X(cuModuleLoadData)                \
  X(cuModuleUnload)                  \
  X(cuModuleGetFunction)             \
  X(cuLaunchKernel)
