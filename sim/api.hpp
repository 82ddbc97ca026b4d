// The sim's implementation of every driver entry point, declared with the driver's own names and types.
// The names pass through cuda.h's versioning macros exactly as the table's members do (cuMemAlloc is
// cuMemAlloc_v2 here too), so table.cc can pair them up entry by entry and the compiler checks that
// each signature is the driver's.
#pragma once

#include <type_traits>

#include "engine/driver/entry_points.hpp"

namespace ferry::sim::api {

#define FERRY_SIM_DECLARE_ENTRY(name, version) std::remove_pointer_t<decltype(&::name)> name;
FERRY_DRIVER_ENTRY_POINTS(FERRY_SIM_DECLARE_ENTRY)
#undef FERRY_SIM_DECLARE_ENTRY

}  // namespace ferry::sim::api
