// ferry/ferry.hpp compiles on its own: it is the first thing included.
#include "ferry/ferry.hpp"
