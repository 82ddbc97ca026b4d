// Makes a program's first driver call (device::count) and prints how it ended, for no_driver_test: a
// program without a usable driver must fail with a cuda_error that says why, and never run on the sim
// unless the sim was chosen. With --select-sim it chooses the sim in code first.
#include <cstring>
#include <exception>
#include <iostream>

#include "ferry/backend.hpp"
#include "ferry/context.hpp"
#include "ferry/error.hpp"

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--select-sim") == 0) ferry::select_backend(ferry::backend::sim);
    const int devices = ferry::device::count();
    std::cout << "devices: " << devices << " on the " << ferry::to_string(ferry::active_backend()) << " backend\n";
    return 0;
  } catch (const ferry::cuda_error& error) {
    std::cout << "cuda_error: " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cout << "other error: " << error.what() << "\n";
    return 2;
  }
}
