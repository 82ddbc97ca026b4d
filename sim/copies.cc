// One-dimensional copies: host to device, device to host, device to device, and between contexts.
// Every range is validated when the call is made; the bytes move when the stream (or, for the
// synchronous forms, the calling thread once the legacy stream has drained) gets to the copy.
#include <cstdint>
#include <memory>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/copy_engine.hpp"
#include "sim/memory_registry.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

enum class side { host, device };

struct linear_copy {
  resolved destination;
  resolved source;
  std::size_t bytes = 0;
  void operator()() const { engine_copy(destination.host, source.host, bytes); }
};

CUresult resolve_side(side where, std::uintptr_t address, std::size_t bytes, resolved& out) {
  if (where == side::device) return resolve_device(address, bytes, out);
  return resolve_host(reinterpret_cast<const void*>(address), bytes, out);
}

CUresult plan(side to, std::uintptr_t destination, side from, std::uintptr_t source, std::size_t bytes,
              linear_copy& copy) {
  copy.bytes = bytes;
  FERRY_SIM_TRY(resolve_side(to, destination, bytes, copy.destination));
  return resolve_side(from, source, bytes, copy.source);
}

CUresult copy_now(side to, std::uintptr_t destination, side from, std::uintptr_t source, std::size_t bytes) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (bytes == 0) return CUDA_SUCCESS;
  linear_copy copy;
  FERRY_SIM_TRY(plan(to, destination, from, source, bytes, copy));
  return run_synchronously(*ctx, copy);
}

CUresult copy_async(side to, std::uintptr_t destination, side from, std::uintptr_t source, std::size_t bytes,
                    CUstream handle) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(handle, s));
  if (bytes == 0) return CUDA_SUCCESS;
  linear_copy copy;
  FERRY_SIM_TRY(plan(to, destination, from, source, bytes, copy));
  return enqueue(*s, {std::move(copy)});
}

// The contexts of a peer copy must be live, and device memory must be on their devices.
CUresult plan_peer(CUdeviceptr destination, CUcontext destination_context, CUdeviceptr source,
                   CUcontext source_context, std::size_t bytes, linear_copy& copy, context*& to, context*& from) {
  to = find_context(destination_context);
  from = find_context(source_context);
  if (to == nullptr || from == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  FERRY_SIM_TRY(to->sticky());
  FERRY_SIM_TRY(from->sticky());
  if (bytes == 0) return CUDA_SUCCESS;
  FERRY_SIM_TRY(plan(side::device, destination, side::device, source, bytes, copy));
  auto on_device_of = [](const resolved& r, const context& ctx) {
    return r.keep->kind != memory_kind::device || r.keep->owner->device() == ctx.device();
  };
  if (!on_device_of(copy.destination, *to) || !on_device_of(copy.source, *from)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

std::uintptr_t address_of(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuMemcpyHtoD(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  return copy_now(side::device, dstDevice, side::host, address_of(srcHost), ByteCount);
}

CUresult cuMemcpyDtoH(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_now(side::host, address_of(dstHost), side::device, srcDevice, ByteCount);
}

CUresult cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  return copy_now(side::device, dstDevice, side::device, srcDevice, ByteCount);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream) {
  return copy_async(side::device, dstDevice, side::host, address_of(srcHost), ByteCount, hStream);
}

CUresult cuMemcpyDtoHAsync(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  return copy_async(side::host, address_of(dstHost), side::device, srcDevice, ByteCount, hStream);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  return copy_async(side::device, dstDevice, side::device, srcDevice, ByteCount, hStream);
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                      size_t ByteCount) {
  context* current = nullptr;
  FERRY_SIM_TRY(current_context(current));
  linear_copy copy;
  context* to = nullptr;
  context* from = nullptr;
  FERRY_SIM_TRY(plan_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, copy, to, from));
  if (ByteCount == 0) return CUDA_SUCCESS;
  FERRY_SIM_TRY(drain_legacy_order(*from));
  if (to != from) FERRY_SIM_TRY(drain_legacy_order(*to));
  copy();
  return current->sticky();
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(stream_for_memory_call(hStream, s));
  linear_copy copy;
  context* to = nullptr;
  context* from = nullptr;
  FERRY_SIM_TRY(plan_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, copy, to, from));
  if (ByteCount == 0) return CUDA_SUCCESS;
  return enqueue(*s, {std::move(copy)});
}

}  // namespace ferry::sim::api
