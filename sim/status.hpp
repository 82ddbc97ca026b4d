// Early return on a failed CUresult, the pattern every entry point of the sim is written in.
#pragma once

#include <cuda.h>

#define FERRY_SIM_TRY(expression)                                                      \
  do {                                                                                 \
    if (const CUresult ferry_sim_status_ = (expression); ferry_sim_status_ != CUDA_SUCCESS) \
      return ferry_sim_status_;                                                        \
  } while (false)
