// The pipeline_server command: parses the flags, starts the server with ferry's GPU step, prints where it
// listens, serves until SIGINT or SIGTERM, then shuts down gracefully (in-flight requests finish within
// the grace period). A library, so that a test can run the command in a child process and signal it.
#pragma once

#include <ostream>

namespace ferry::pipeline {

// Returns 0 after a signal-initiated shutdown. Exits the process with status 0 after writing the usage
// for --help, and with status 2 after naming a flag it cannot accept (tools/command_line). Throws what
// the server's constructor throws (std::invalid_argument for options that cannot work together).
int run_command(int argc, char** argv, std::ostream& out);

}  // namespace ferry::pipeline
