// ferry/device_set.hpp compiles on its own: it is the first thing included.
#include "ferry/device_set.hpp"
