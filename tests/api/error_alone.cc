// ferry/error.hpp compiles on its own: it is the first thing included.
#include "ferry/error.hpp"
