// The command lines of the benchmarks (tools/command_line: one style for every tool). Those that write a
// report take --out DIR and --machine NAME; a benchmark adds its own flags beside them, and one without
// flags still answers --help and refuses anything else.
#pragma once

#include <string>

#include "tools/command_line/command_line.hpp"

namespace ferry::bench {

struct options {
  std::string out_dir = "bench/results";
  std::string machine;  // empty: derived from the device name ("h200" for an H200, "sim" on sim)
};

// The tool's name for messages: argv[0] without its folder.
std::string program_name(const char* argv0);

// Declares --out and --machine, read into `into`.
void add_report_flags(tools::command_line& command, options& into);

// The command line of a benchmark whose only flags are --out and --machine. Exits after --help (status 0)
// and after a mistake (status 2, naming it).
options parse_options(int argc, char** argv, const char* summary);

// The command line of a benchmark that takes no flags: --help, and nothing else.
void parse_no_flags(int argc, char** argv, const char* summary);

// The machine a report is named after: --machine when given; else "sim" on the simulated driver (backend
// "sim"), "h200" on an H200 and `other` on any other device.
std::string machine_name(const options& parsed, const std::string& backend, const std::string& device_name,
                         const std::string& other = "gpu");

}  // namespace ferry::bench
