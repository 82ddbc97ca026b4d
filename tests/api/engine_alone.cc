// ferry/engine.hpp compiles on its own: it is the first thing included.
#include "ferry/engine.hpp"
