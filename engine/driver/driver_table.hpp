// The table of driver entry points every CUDA call in ferry goes through, and the choice of backend.
#pragma once

#include <string>
#include <string_view>

#include "engine/driver/entry_points.hpp"

namespace ferry::detail {

struct driver_table {
#define FERRY_DECLARE_ENTRY(name, version) decltype(&::name) name = nullptr;
  FERRY_DRIVER_ENTRY_POINTS(FERRY_DECLARE_ENTRY)
#undef FERRY_DECLARE_ENTRY
};

enum class backend_kind { cuda, sim };

std::string_view to_string(backend_kind kind) noexcept;

// The table of the backend FERRY_BACKEND selects (cuda | sim | auto; auto, the default, takes cuda when
// libcuda.so.1 loads and reports at least one device, else sim). Chosen once, on first use; cuInit has
// been called on it. Throws std::runtime_error when FERRY_BACKEND=cuda and no driver or device is usable,
// or when FERRY_BACKEND names no backend.
const driver_table& driver();

// Which backend driver() chose (choosing it if nothing has asked yet).
backend_kind active_backend();

// The two backends. cuda_table() returns nullptr (and why, in *why_not) when libcuda.so.1 cannot be
// loaded or lacks an entry point; sim_table() always succeeds.
const driver_table* cuda_table(std::string* why_not);
const driver_table& sim_table();

}  // namespace ferry::detail
