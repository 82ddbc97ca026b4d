// ferry/kernel_module.hpp compiles on its own: it is the first thing included.
#include "ferry/kernel_module.hpp"
