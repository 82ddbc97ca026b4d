// The pipeline_server command: parses the flags, starts the server with ferry's GPU step, prints where it
// listens, serves until SIGINT or SIGTERM, then shuts down gracefully (in-flight requests finish within
// the grace period). A library, so that a test can run the command in a child process and signal it.
#pragma once

#include <ostream>

namespace ferry::pipeline {

// Returns 0 after a signal-initiated shutdown (or after printing the usage for --help). Throws
// std::invalid_argument for bad flags (naming the flag and its value) and what the server's constructor
// throws.
int run_command(int argc, char** argv, std::ostream& out);

}  // namespace ferry::pipeline
