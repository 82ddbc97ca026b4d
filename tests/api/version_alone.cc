// ferry/version.hpp compiles on its own: it is the first thing included.
#include "ferry/version.hpp"
