// Makes the engine's context current on a caller's thread for one submission, then restores the
// caller's: a thread that calls into the engine need not have the engine's context, and keeps its own.
#pragma once

#include <cuda.h>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

class caller_context {
 public:
  caller_context(const driver_table& driver, CUcontext context) : driver_(driver) {
    CUcontext current = nullptr;
    driver_.cuCtxGetCurrent(&current);
    if (current != context) {
      pushed_ = driver_.cuCtxPushCurrent(context) == CUDA_SUCCESS;
    }
  }
  caller_context(const caller_context&) = delete;
  caller_context& operator=(const caller_context&) = delete;
  ~caller_context() {
    if (pushed_) {
      CUcontext popped = nullptr;
      driver_.cuCtxPopCurrent(&popped);
    }
  }

 private:
  const driver_table& driver_;
  bool pushed_ = false;
};

}  // namespace ferry::detail
