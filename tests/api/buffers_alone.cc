// ferry/buffers.hpp compiles on its own: it is the first thing included.
#include "ferry/buffers.hpp"
