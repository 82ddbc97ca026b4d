#include "engine/async/event_pool.hpp"

namespace ferry::detail {

event_pool::~event_pool() {
  for (CUevent event : free_) driver_.cuEventDestroy(event);
}

CUresult event_pool::acquire(CUevent& event) {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      event = free_.back();
      free_.pop_back();
      return CUDA_SUCCESS;
    }
  }
  return driver_.cuEventCreate(&event, flags_);
}

void event_pool::release(CUevent event) {
  std::lock_guard lock(mutex_);
  free_.push_back(event);
}

}  // namespace ferry::detail
