// The driver entry points ferry calls: one list, used to declare the table, to load it from
// libcuda.so.1 and to fill it from the simulation. Each entry keeps the driver's own signature
// (decltype of the declaration in cuda.h), so engine code reads like plain driver-API code.
#pragma once

#include <cuda.h>

#if CUDA_VERSION < 12080
#error "ferry needs the CUDA 12.8 (or newer) headers"
#endif

// X(name, version): `name` is the API name as written in code (cuda.h maps it to the ABI it declares,
// e.g. cuMemAlloc -> cuMemAlloc_v2); #name is the unversioned symbol cuGetProcAddress resolves, and
// `version` the CUDA version whose ABI of it matches that declaration (its PFN_<name>_v<version> in
// cudaTypedefs.h; the cuda backend checks the match at compile time). Asking cuGetProcAddress for
// CUDA_VERSION instead would be wrong where a newer ABI kept the old name: with CUDA 13, cuCtxSynchronize
// and cuCtxGetDevice resolve to variants that take a context argument.
#define FERRY_DRIVER_ENTRY_POINTS(X) \
  X(cuInit, 2000)                         \
  X(cuDriverGetVersion, 2020)             \
  X(cuGetErrorName, 6000)                 \
  X(cuGetErrorString, 6000)               \
  X(cuDeviceGet, 2000)                    \
  X(cuDeviceGetCount, 2000)               \
  X(cuDeviceGetName, 2000)                \
  X(cuDeviceGetAttribute, 2000)           \
  X(cuDeviceTotalMem, 3020)               \
  X(cuDeviceCanAccessPeer, 4000)          \
  X(cuDeviceGetP2PAttribute, 8000)        \
  X(cuDevicePrimaryCtxRetain, 7000)       \
  X(cuDevicePrimaryCtxRelease, 11000)     \
  X(cuCtxCreate, 12050)                   \
  X(cuCtxDestroy, 4000)                   \
  X(cuCtxGetCurrent, 4000)                \
  X(cuCtxSetCurrent, 4000)                \
  X(cuCtxPushCurrent, 4000)               \
  X(cuCtxPopCurrent, 4000)                \
  X(cuCtxGetId, 12000)                     \
  X(cuCtxGetDevice, 2000)                 \
  X(cuCtxSynchronize, 2000)               \
  X(cuCtxEnablePeerAccess, 4000)          \
  X(cuCtxDisablePeerAccess, 4000)         \
  X(cuMemGetInfo, 3020)                   \
  X(cuMemAlloc, 3020)                     \
  X(cuMemFree, 3020)                      \
  X(cuMemAllocManaged, 6000)              \
  X(cuMemHostAlloc, 2020)                 \
  X(cuMemFreeHost, 2000)                  \
  X(cuMemHostRegister, 6050)              \
  X(cuMemHostUnregister, 4000)            \
  X(cuMemHostGetDevicePointer, 3020)      \
  X(cuMemGetAddressRange, 3020)           \
  X(cuPointerGetAttribute, 4000)          \
  X(cuPointerGetAttributes, 7000)         \
  X(cuMemcpyHtoD, 3020)                   \
  X(cuMemcpyDtoH, 3020)                   \
  X(cuMemcpyDtoD, 3020)                   \
  X(cuMemcpyHtoDAsync, 3020)              \
  X(cuMemcpyDtoHAsync, 3020)              \
  X(cuMemcpyDtoDAsync, 3020)              \
  X(cuMemcpy2D, 3020)                     \
  X(cuMemcpy2DAsync, 3020)                \
  X(cuMemcpyPeer, 4000)                   \
  X(cuMemcpyPeerAsync, 4000)              \
  X(cuMemcpyBatchAsync, 13000)            \
  X(cuMemsetD8, 3020)                     \
  X(cuMemsetD16, 3020)                    \
  X(cuMemsetD32, 3020)                    \
  X(cuMemsetD8Async, 3020)                \
  X(cuMemsetD16Async, 3020)               \
  X(cuMemsetD32Async, 3020)               \
  X(cuMemPrefetchAsync, 12020)            \
  X(cuMemAdvise, 12020)                   \
  X(cuStreamAttachMemAsync, 6000)         \
  X(cuStreamCreate, 2000)                 \
  X(cuStreamCreateWithPriority, 5050)     \
  X(cuCtxGetStreamPriorityRange, 5050)    \
  X(cuStreamDestroy, 4000)                \
  X(cuStreamSynchronize, 2000)            \
  X(cuStreamQuery, 2000)                  \
  X(cuStreamGetCtx, 9020)                 \
  X(cuStreamWaitEvent, 3020)              \
  X(cuStreamWaitValue32, 11070)           \
  X(cuStreamWriteValue32, 11070)          \
  X(cuLaunchHostFunc, 10000)              \
  X(cuEventCreate, 2000)                  \
  X(cuEventDestroy, 4000)                 \
  X(cuEventRecord, 2000)                  \
  X(cuEventQuery, 2000)                   \
  X(cuEventSynchronize, 2000)             \
  X(cuEventElapsedTime, 12080)            \
  X(cuModuleLoadData, 2000)               \
  X(cuModuleUnload, 2000)                 \
  X(cuModuleGetFunction, 2000)            \
  X(cuLaunchKernel, 4000)
