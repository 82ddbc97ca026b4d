// A program compiled as C++17 is told first that ferry needs C++20, rather than only given errors deep
// in Asio or in its own coroutine code.
// std: c++17
// expect-error: ferry needs C++20
#include "ferry/ferry.hpp"
