// ferry/views.hpp compiles on its own: it is the first thing included.
#include "ferry/views.hpp"
