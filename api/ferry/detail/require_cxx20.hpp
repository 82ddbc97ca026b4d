// ferry's headers use C++20 (concepts, std::span, coroutines through Asio). A compiler left at its
// default language (g++ 12: C++17) otherwise fails later with errors that do not say why, such as
// "'co_spawn' is not a member of 'asio'" in the user's own code; this says why, first.
#pragma once

#if __cplusplus < 202002L
#error "ferry needs C++20: compile with -std=c++20 (Bazel: `build --cxxopt=-std=c++20` in your .bazelrc; CMake: link ferry::ferry, which requires cxx_std_20)"
#endif
