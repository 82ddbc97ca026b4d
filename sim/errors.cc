// cuGetErrorName and cuGetErrorString, with the driver's own names and messages. As with the driver, a
// value that is not a CUresult gets CUDA_ERROR_INVALID_VALUE and a null string.
#include "sim/api.hpp"

namespace ferry::sim::detail {
namespace {

struct description {
  const char* name;
  const char* message;
};

#define FERRY_SIM_ERRORS(X)                                                                                   \
  X(CUDA_SUCCESS, "no error")                                                                                 \
  X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                             \
  X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                                \
  X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                                       \
  X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                                         \
  X(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool")                    \
  X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, "profiler not initialized: call cudaProfilerInitialize()")           \
  X(CUDA_ERROR_PROFILER_ALREADY_STARTED, "profiler already started")                                          \
  X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, "profiler already stopped")                                          \
  X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")                                                 \
  X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, "API call is not supported in the installed CUDA driver")          \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable")                       \
  X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                               \
  X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                                      \
  X(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license")                                 \
  X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                               \
  X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                                     \
  X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                                            \
  X(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")                                                 \
  X(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed")                                             \
  X(CUDA_ERROR_ARRAY_IS_MAPPED, "array is mapped")                                                            \
  X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                                                     \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device")                 \
  X(CUDA_ERROR_ALREADY_ACQUIRED, "resource already acquired")                                                 \
  X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                                                             \
  X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, "resource not mapped as array")                                           \
  X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, "resource not mapped as pointer")                                       \
  X(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered")                                      \
  X(CUDA_ERROR_UNSUPPORTED_LIMIT, "limit is not supported on this architecture")                              \
  X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use by a different thread")        \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices")             \
  X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")                                                   \
  X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, "invalid OpenGL or DirectX context")                                 \
  X(CUDA_ERROR_NVLINK_UNCORRECTABLE, "uncorrectable NVLink error detected during the execution")              \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found")                                  \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain.")        \
  X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled")                                  \
  X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, "the provided execution affinity is not supported")                 \
  X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, "the provided PTX contains unsupported call to cudaDeviceSynchronize") \
  X(CUDA_ERROR_CONTAINED, "an error was contained")                                                           \
  X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid")                                              \
  X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                                              \
  X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, "shared object symbol not found")                              \
  X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, "shared object initialization failed")                              \
  X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS")                      \
  X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                                     \
  X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")                       \
  X(CUDA_ERROR_LOSSY_QUERY, "attempted introspection would be semantically lossy")                            \
  X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                                           \
  X(CUDA_ERROR_NOT_READY, "device not ready")                                                                 \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                                   \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")                            \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")                                     \
  X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, "launch uses incompatible texturing mode")                      \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled")                                 \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled")                                   \
  X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "cannot set while device is active in this process")                   \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                                                  \
  X(CUDA_ERROR_ASSERT, "device-side assert triggered")                                                        \
  X(CUDA_ERROR_TOO_MANY_PEERS, "peer mapping resources exhausted")                                            \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region")       \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error")                                                  \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered")                                 \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                                                      \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space")               \
  X(CUDA_ERROR_INVALID_PC, "invalid program counter")                                                         \
  X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                                                   \
  X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch")                         \
  X(CUDA_ERROR_TENSOR_MEMORY_LEAK, "tensor memory not completely freed")                                      \
  X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                                      \
  X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                                      \
  X(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized")                                                \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination")     \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, "forward compatibility was attempted on non supported HW")     \
  X(CUDA_ERROR_MPS_CONNECTION_FAILED, "MPS client failed to connect to the MPS control daemon or the MPS server") \
  X(CUDA_ERROR_MPS_RPC_FAILURE, "the remote procedural call between the MPS server and the MPS client failed") \
  X(CUDA_ERROR_MPS_SERVER_NOT_READY, "MPS server is not ready to accept new MPS client requests")             \
  X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, "the hardware resources required to create MPS client have been exhausted") \
  X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED,                                                                   \
    "the hardware resources required to support device connections have been exhausted")                      \
  X(CUDA_ERROR_MPS_CLIENT_TERMINATED, "the MPS client has been terminated by the server")                     \
  X(CUDA_ERROR_CDP_NOT_SUPPORTED, "the module is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it") \
  X(CUDA_ERROR_CDP_VERSION_MISMATCH, "the module uses an unsupported interface between CUDA Dynamic Parallelism versions") \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")                \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture")         \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences")      \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began")              \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work")                                 \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream")           \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream") \
  X(CUDA_ERROR_CAPTURED_EVENT, "operation not permitted on an event last recorded in a capturing stream")    \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread") \
  X(CUDA_ERROR_TIMEOUT, "wait operation timed out")                                                           \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,                                                                     \
    "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
  X(CUDA_ERROR_EXTERNAL_DEVICE, "an async error has occured in external entity outside of CUDA")             \
  X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "a kernel launch error has occurred due to cluster misconfiguration")    \
  X(CUDA_ERROR_FUNCTION_NOT_LOADED, "the function handle is not loaded when calling an API that requires a loaded function") \
  X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "one or more resources passed in are not valid resource types for the operation") \
  X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "one or more resources are insufficient or non-applicable for the operation") \
  X(CUDA_ERROR_KEY_ROTATION, "an error happened during the key rotation sequence")                            \
  X(CUDA_ERROR_UNKNOWN, "unknown error")

const description* describe(CUresult status) {
  switch (status) {
#define FERRY_SIM_DESCRIBE(status, message) \
  case status: {                            \
    static constexpr description d{#status, message}; \
    return &d;                              \
  }
    FERRY_SIM_ERRORS(FERRY_SIM_DESCRIBE)
#undef FERRY_SIM_DESCRIBE
  }
  return nullptr;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const detail::description* d = detail::describe(error);
  *pStr = d == nullptr ? nullptr : d->name;
  return d == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const detail::description* d = detail::describe(error);
  *pStr = d == nullptr ? nullptr : d->message;
  return d == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
