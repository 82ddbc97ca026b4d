// The benchmarks' check of a raw driver call: a failure ends the run with the call's name and status
// (a benchmark has no caller to hand an error to).
#pragma once

#include <cuda.h>

#include <stdexcept>
#include <string>

namespace ferry::bench {

inline void check(CUresult status, const char* call) {
  if (status != CUDA_SUCCESS) throw std::runtime_error(std::string(call) + " failed with status " + std::to_string(status));
}

}  // namespace ferry::bench
