// pipeline_server: the example server on the command line (command.hpp). `pipeline_server --help` lists
// the flags.
#include <iostream>
#include <stdexcept>

#include "examples/pipeline_server/command.hpp"

int main(int argc, char** argv) try {
  return ferry::pipeline::run_command(argc, argv, std::cout);
} catch (const std::exception& error) {
  std::cerr << "pipeline_server: " << error.what() << "\n";
  return 1;
}
