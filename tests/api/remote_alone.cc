// ferry/remote.hpp compiles on its own (and without UCX's headers): it is the first thing included.
#include "ferry/remote.hpp"
