// ferry/engine_options.hpp compiles on its own: it is the first thing included.
#include "ferry/engine_options.hpp"
