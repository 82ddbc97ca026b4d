// Which driver backend this process runs on. The real driver (libcuda.so.1) unless the sim, ferry's host
// simulation of the driver for tests, is chosen: FERRY_BACKEND=sim, or select_backend(backend::sim)
// before the first driver call, in a program that links the sim (//sim). Nothing falls back to the sim:
// without a usable driver the first driver call throws a cuda_error that says why.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <string_view>

namespace ferry {

enum class backend { cuda, sim };

// The backend in use, chosen on first use (FERRY_BACKEND=cuda|sim; unset: cuda).
backend active_backend();

// Chooses the backend in code; call it before anything else uses the driver (it takes precedence over
// FERRY_BACKEND). Throws std::logic_error when a different backend is in use already.
void select_backend(backend which);

std::string_view to_string(backend which) noexcept;

}  // namespace ferry
