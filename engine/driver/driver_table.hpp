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

// The table of the chosen backend: the real driver (libcuda.so.1, or $FERRY_CUDA_LIBRARY), unless the
// sim was chosen (FERRY_BACKEND=sim, or select_backend before the first call). Chosen once, on first use;
// cuInit has been called on it. Never throws: when the chosen backend cannot be used (no driver, cuInit
// fails, no device; the sim chosen but not linked; FERRY_BACKEND naming no backend) every entry point of
// the table answers with a status whose cuGetErrorString text says why, so that the first checked call
// throws a cuda_error with the reason. Nothing falls back to the sim.
const driver_table& driver();

// Which backend driver() chose (choosing it if nothing has asked yet).
backend_kind active_backend();

// Chooses the backend in code. Throws std::logic_error when a different one is in use already.
void select_backend(backend_kind kind);

// The cuda backend: nullptr (and why, in *why_not) when the driver library cannot be loaded or lacks an
// entry point.
const driver_table* cuda_table(std::string* why_not);

// The sim is its own library (//sim, beside the engine), linked by tests and never by default: linking it
// registers its table here, which makes FERRY_BACKEND=sim usable.
void register_sim_backend(const driver_table& (*table)()) noexcept;

}  // namespace ferry::detail
