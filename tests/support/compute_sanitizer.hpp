// Whether this process runs under compute-sanitizer, which slows every driver call many times over and
// follows child processes: suites size themselves (or skip a case) by it.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace ferry::testing {

// compute-sanitizer exports NV_SANITIZER_INJECTION_PORT_BASE (or names its library in
// CUDA_INJECTION64_PATH) and maps libsanitizer-collection.so into the process it runs.
inline bool under_compute_sanitizer() {
  if (std::getenv("NV_SANITIZER_INJECTION_PORT_BASE")) return true;
  const char* injection = std::getenv("CUDA_INJECTION64_PATH");
  if (injection && std::string_view(injection).ends_with("libsanitizer-collection.so")) return true;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.ends_with("/libsanitizer-collection.so")) return true;
  }
  return false;
}

}  // namespace ferry::testing
