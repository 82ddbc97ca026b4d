// ferry/blocks.hpp compiles on its own: it is the first thing included.
#include "ferry/blocks.hpp"
