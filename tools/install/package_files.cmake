# cmake -DFERRY_PREFIX=DIR -DFERRY_VERSION=X.Y.Z -DFERRY_CUDA_INCLUDE_DIR=DIR -P package_files.cmake
# Writes the files that describe an installed ferry to CMake and pkg-config (tools/ferry install runs
# it): DIR/lib/cmake/ferry/ferry-config{,-version}.cmake and DIR/lib/pkgconfig/ferry{,-sim}.pc.
cmake_minimum_required(VERSION 3.16)
include(CMakePackageConfigHelpers)

foreach(required FERRY_PREFIX FERRY_VERSION FERRY_CUDA_INCLUDE_DIR)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "package_files.cmake: -D${required}=... is required")
  endif()
endforeach()
string(REPLACE "." ";" _parts "${FERRY_VERSION}")
list(GET _parts 0 FERRY_VERSION_MAJOR)
list(GET _parts 1 FERRY_VERSION_MINOR)

set(_here "${CMAKE_CURRENT_LIST_DIR}")
configure_file("${_here}/ferry-config.cmake.in" "${FERRY_PREFIX}/lib/cmake/ferry/ferry-config.cmake" @ONLY)
# Until 1.0 a new minor version may break source compatibility (CHANGELOG.md): 0.1 accepts 0.1.x only.
write_basic_package_version_file("${FERRY_PREFIX}/lib/cmake/ferry/ferry-config-version.cmake"
                                 VERSION "${FERRY_VERSION}" COMPATIBILITY SameMinorVersion)
configure_file("${_here}/ferry.pc.in" "${FERRY_PREFIX}/lib/pkgconfig/ferry.pc" @ONLY)
configure_file("${_here}/ferry-sim.pc.in" "${FERRY_PREFIX}/lib/pkgconfig/ferry-sim.pc" @ONLY)
