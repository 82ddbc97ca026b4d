// Context entry points: primary contexts, created contexts, the current-context stack, synchronization
// and peer access.
#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

bool valid_context_flags(unsigned flags) {
  constexpr unsigned known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                             CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS;
  const unsigned schedule = flags & CU_CTX_SCHED_MASK;
  const bool one_schedule = schedule == CU_CTX_SCHED_AUTO || schedule == CU_CTX_SCHED_SPIN ||
                            schedule == CU_CTX_SCHED_YIELD || schedule == CU_CTX_SCHED_BLOCKING_SYNC;
  return (flags & ~known) == 0 && one_schedule;
}

}  // namespace
}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) { return retain_primary(dev, pctx); }

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return release_primary(dev); }

CUresult cuCtxCreate(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev) {
  if (!valid_context_flags(flags)) return CUDA_ERROR_INVALID_VALUE;
  if (ctxCreateParams != nullptr) {
    // Execution affinity needs MPS and CIG needs a graphics client; the sim has neither.
    if (ctxCreateParams->numExecAffinityParams != 0) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    if (ctxCreateParams->cigParams != nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  }
  return create_context(dev, pctx);
}

CUresult cuCtxDestroy(CUcontext ctx) { return destroy_context(ctx); }

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  context* top = top_of_stack();
  *pctx = top == nullptr ? nullptr : top->handle();
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx == nullptr) {
    set_current(nullptr);
    return CUDA_SUCCESS;
  }
  context* found = find_context(ctx);
  if (found == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  set_current(found);
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  context* found = find_context(ctx);
  if (found == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  push_current(found);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* pctx) {
  context* popped = pop_current();
  if (popped == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = popped->handle();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  context* found = nullptr;
  if (ctx == nullptr) {
    FERRY_SIM_TRY(current_context(found));
  } else {
    found = find_context(ctx);
    if (found == nullptr || !found->alive()) return CUDA_ERROR_INVALID_CONTEXT;
  }
  *ctxId = found->id();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = ctx->device();
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context_even_if_poisoned(ctx));
  return synchronize_context(*ctx);
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  context* peer = find_context(peerContext);
  if (peer == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // cuDeviceCanAccessPeer is 0 for a device with itself.
  if (peer->device() == ctx->device()) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  return ctx->enable_peer_access(*peer);
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  context* peer = find_context(peerContext);
  if (peer == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return ctx->disable_peer_access(*peer);
}

}  // namespace ferry::sim::api
