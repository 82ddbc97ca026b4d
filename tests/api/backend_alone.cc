// ferry/backend.hpp compiles on its own: it is the first thing included.
#include "ferry/backend.hpp"
