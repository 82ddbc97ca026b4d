// Simulated modules: images are not interpreted; functions are the host twins registered by name.
#pragma once

#include <cstddef>

namespace ferry::sim::detail {

class context;

void forget_modules_of(const context* ctx);
std::size_t module_count();

}  // namespace ferry::sim::detail
