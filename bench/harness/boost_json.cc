// Boost.JSON's implementation, compiled once for the programs that link the harness (its header-only
// form: the GPU machine then needs no Boost library). No other file of a program may include src.hpp.
#include <boost/json/src.hpp>
