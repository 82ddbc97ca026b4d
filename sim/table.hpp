// The sim's driver table, for tests that drive the simulation directly (the engine reaches it through
// ferry::detail::driver() once the sim is chosen).
#pragma once

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

const driver_table& sim_table();

}  // namespace ferry::detail
