// A timed round trip of every Marshal operation against the raw driver call that does the same work.
// Each run is complete when it returns (asynchronous forms include their stream synchronisation). The
// cases: marshal_copies.cc (data moved) and marshal_calls.cc (allocations, queries, prefetch).
#include <cctype>
#include <iostream>
#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/program.hpp"
#include "bench/marshal_fixture.hpp"

using namespace ferry;

namespace {

// An unknown device's report is named after it: lower case, anything but letters and digits as '_'.
std::string plain_name(const std::string& device_name) {
  std::string name;
  for (char c : device_name) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return name;
}

std::string describe(const device& gpu) {
  int driver_version = 0;
  detail::driver().cuDriverGetVersion(&driver_version);
  return gpu.name() + ", " + std::to_string(gpu.total_memory() >> 20) + " MiB, driver API " +
         std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10) + ", compute " +
         std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)) + "." +
         std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)) + ", " +
         std::to_string(gpu.attribute(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)) + " copy engines";
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::comparison_program program(
      argc, argv,
      "A timed round trip of every Marshal operation against the raw driver call doing the same work\n"
      "(the report goes to <out>/<machine>-marshal.{json,md}).");
  const device& gpu = program.on.gpu;
  const mem_info memory = get_mem_info();
  const std::string description = describe(gpu);
  std::cerr << "ferry bench on the " << program.backend << " backend: " << description << ", free "
            << (memory.free >> 20) << " MiB\n";

  bench::marshal_fixture fixture(gpu, program.on.primary);
  program.report(bench::run_groups(fixture, {bench::linear_copies, bench::pitched_copies, bench::peer_copies,
                                             bench::memsets, bench::allocations, bench::queries,
                                             bench::managed_prefetch}),
                 "marshal", description, plain_name(gpu.name()));
  return 0;
} catch (const std::exception& error) {
  std::cerr << "marshal_roundtrip: " << error.what() << "\n";
  return 1;
}
