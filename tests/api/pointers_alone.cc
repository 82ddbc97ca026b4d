// ferry/pointers.hpp compiles on its own: it is the first thing included.
#include "ferry/pointers.hpp"
