// Timing-disabled events, created on demand and reused: recording and querying an event is cheap,
// creating one far dearer.
#pragma once

#include <cuda.h>

#include <mutex>
#include <vector>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class event_pool {
 public:
  event_pool(const driver_table& driver, unsigned flags) : driver_(driver), flags_(flags) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  ~event_pool();

  // An event from the pool, or a new one; the status of cuEventCreate when that fails.
  CUresult acquire(CUevent& event);
  void release(CUevent event);

 private:
  const driver_table& driver_;
  unsigned flags_;
  std::mutex mutex_;
  std::vector<CUevent> free_;
};

}  // namespace ferry::detail
