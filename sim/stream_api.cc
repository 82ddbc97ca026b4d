// The stream entry points: creation and destruction, synchronization, cross-stream waits on events,
// and host functions.
#include <memory>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/events.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (phStream == nullptr || (Flags != CU_STREAM_DEFAULT && Flags != CU_STREAM_NON_BLOCKING)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto type = Flags == CU_STREAM_NON_BLOCKING ? stream::kind::non_blocking : stream::kind::blocking;
  *phStream = create_user_stream(*ctx, type)->handle();
  return CUDA_SUCCESS;
}

// Priorities order the scheduling of kernels' blocks on a GPU (the driver clamps one outside the range);
// the sim runs each stream's work in order on its own worker, and ignores them.
CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  (void)priority;
  return ferry::sim::api::cuStreamCreate(phStream, flags);
}

CUresult cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  // The range of the GPUs the sim models (an H200's): 0 is the lowest priority, -5 the highest.
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  FERRY_SIM_TRY(destroy_user_stream(hStream));
  return s->owner().sticky();
}

CUresult cuStreamSynchronize(CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  if (s->type() == stream::kind::legacy) return drain_legacy_order(s->owner());
  s->wait(s->submitted());
  return s->owner().sticky();
}

CUresult cuStreamQuery(CUstream hStream) {
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  FERRY_SIM_TRY(s->owner().sticky());
  const bool idle = s->reached(s->submitted());
  // Asked again: a failure met meanwhile lets the worker skip the rest of the queue, so the stream may
  // look idle only because of it (the worker poisons the context before it counts any skipped work).
  FERRY_SIM_TRY(s->owner().sticky());
  return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// The context a stream belongs to; the legacy and per-thread handles name the current context's.
CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  *pctx = s->owner().handle();
  return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  std::shared_ptr<stream> s;
  std::shared_ptr<event> e;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  FERRY_SIM_TRY(find_event(hEvent, e));
  // CU_EVENT_WAIT_EXTERNAL only matters to stream capture, which the sim does not do.
  if ((Flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
  FERRY_SIM_TRY(s->owner().sticky());
  std::shared_ptr<record_point> point = e->last();
  // Waiting on nothing, or on a point already passed, orders nothing.
  if (point == nullptr || point->reached()) return CUDA_SUCCESS;
  context& waiter = s->owner();
  return enqueue(*s, {[point, &waiter] { point->wait(waiter); }});
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  std::shared_ptr<stream> s;
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  FERRY_SIM_TRY(s->owner().sticky());
  // Like the driver, a host function is not called once the context has failed: the worker skips it.
  return enqueue(*s, {[fn, userData] { fn(userData); }});
}

}  // namespace ferry::sim::api
