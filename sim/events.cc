#include "sim/events.hpp"

#include <unordered_map>

#include "sim/api.hpp"
#include "sim/contexts.hpp"
#include "sim/status.hpp"
#include "sim/streams.hpp"

namespace ferry::sim::detail {
namespace {

// A poisoned context has no one to mark its pending record points, so waiters re-check this often.
constexpr auto poll_interval = std::chrono::milliseconds(1);

struct event_registry {
  std::mutex mutex;
  std::unordered_map<const event*, std::shared_ptr<event>> live;
};

event_registry& registry() {
  static event_registry* const instance = new event_registry();
  return *instance;
}

}  // namespace

void record_point::mark() noexcept {
  {
    std::lock_guard lock(mutex_);
    reached_ = true;
    when_ = clock::now();
  }
  marked_.notify_all();
}

bool record_point::reached() const {
  std::lock_guard lock(mutex_);
  return reached_;
}

record_point::clock::time_point record_point::when() const {
  std::lock_guard lock(mutex_);
  return when_;
}

bool record_point::wait(const context& waiter) const {
  std::unique_lock lock(mutex_);
  while (!reached_ && !waiter.poisoned()) marked_.wait_for(lock, poll_interval);
  return reached_;
}

std::shared_ptr<record_point> event::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

void event::recorded_at(std::shared_ptr<record_point> point) {
  std::lock_guard lock(mutex_);
  last_ = std::move(point);
}

CUresult find_event(CUevent handle, std::shared_ptr<event>& out) {
  event_registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<const event*>(handle));
  if (handle == nullptr || it == r.live.end()) return CUDA_ERROR_INVALID_HANDLE;
  out = it->second;
  return CUDA_SUCCESS;
}

void forget_events_of(const context* ctx) {
  event_registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.live, [ctx](const auto& entry) { return &entry.second->owner() == ctx; });
}

std::size_t event_count() {
  event_registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.live.size();
}

}  // namespace ferry::sim::detail

namespace ferry::sim::api {

using namespace ferry::sim::detail;

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  constexpr unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  context* ctx = nullptr;
  FERRY_SIM_TRY(current_context(ctx));
  if (phEvent == nullptr || (Flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & CU_EVENT_INTERPROCESS) != 0 && (Flags & CU_EVENT_DISABLE_TIMING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto made = std::make_shared<event>(*ctx, Flags);
  event_registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.live.emplace(made.get(), made);
  *phEvent = reinterpret_cast<CUevent>(made.get());
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent hEvent) {
  std::shared_ptr<event> e;
  {
    event_registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.live.find(reinterpret_cast<const event*>(hEvent));
    if (hEvent == nullptr || it == r.live.end()) return CUDA_ERROR_INVALID_HANDLE;
    e = std::move(it->second);
    r.live.erase(it);
  }
  // A record still queued marks its own record point, which outlives the event.
  return e->owner().sticky();
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  std::shared_ptr<event> e;
  std::shared_ptr<stream> s;
  FERRY_SIM_TRY(find_event(hEvent, e));
  FERRY_SIM_TRY(resolve_stream(hStream, s));
  if (&s->owner() != &e->owner()) return CUDA_ERROR_INVALID_HANDLE;
  FERRY_SIM_TRY(s->owner().sticky());
  auto point = std::make_shared<record_point>();
  FERRY_SIM_TRY(enqueue(*s, {[point] { point->mark(); }, true}));
  e->recorded_at(std::move(point));
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent) {
  std::shared_ptr<event> e;
  FERRY_SIM_TRY(find_event(hEvent, e));
  FERRY_SIM_TRY(e->owner().sticky());
  std::shared_ptr<record_point> point = e->last();
  const bool reached = point == nullptr || point->reached();
  // Asked again: a record runs even in a poisoned context, so it may be reached only because a failure
  // met meanwhile let the worker skip the work before it (the context is poisoned before that).
  FERRY_SIM_TRY(e->owner().sticky());
  return reached ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  std::shared_ptr<event> e;
  FERRY_SIM_TRY(find_event(hEvent, e));
  if (std::shared_ptr<record_point> point = e->last()) point->wait(e->owner());
  return e->owner().sticky();
}

CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  std::shared_ptr<event> start;
  std::shared_ptr<event> end;
  if (pMilliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FERRY_SIM_TRY(find_event(hStart, start));
  FERRY_SIM_TRY(find_event(hEnd, end));
  if (!start->timing() || !end->timing()) return CUDA_ERROR_INVALID_HANDLE;
  FERRY_SIM_TRY(start->owner().sticky());
  FERRY_SIM_TRY(end->owner().sticky());
  std::shared_ptr<record_point> from = start->last();
  std::shared_ptr<record_point> to = end->last();
  if (from == nullptr || to == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!from->reached() || !to->reached()) return CUDA_ERROR_NOT_READY;
  // Asked again, as cuEventQuery does: the records may be reached only because a failure met meanwhile
  // let the work before them be skipped.
  FERRY_SIM_TRY(start->owner().sticky());
  FERRY_SIM_TRY(end->owner().sticky());
  *pMilliseconds = std::chrono::duration<float, std::milli>(to->when() - from->when()).count();
  return CUDA_SUCCESS;
}

}  // namespace ferry::sim::api
