#include "bench/harness/options.hpp"

#include <filesystem>
#include <iostream>

namespace ferry::bench {

std::string program_name(const char* argv0) {
  return argv0 == nullptr ? std::string("benchmark") : std::filesystem::path(argv0).filename().string();
}

void add_report_flags(tools::command_line& command, options& into) {
  command.text("out", into.out_dir, "folder the report <machine>-<suite>.{json,md} is written to")
      .text("machine", into.machine,
            "the report's machine name (default: sim on the simulated driver, h200 on an H200, else gpu)");
}

options parse_options(int argc, char** argv, const char* summary) {
  options parsed;
  tools::command_line command(program_name(argv[0]), summary);
  add_report_flags(command, parsed);
  command.parse_or_exit(argc, argv, std::cout);
  return parsed;
}

void parse_no_flags(int argc, char** argv, const char* summary) {
  tools::command_line(program_name(argv[0]), summary).parse_or_exit(argc, argv, std::cout);
}

std::string machine_name(const options& parsed, const std::string& backend, const std::string& device_name,
                         const std::string& other) {
  if (!parsed.machine.empty()) return parsed.machine;
  if (backend == "sim") return "sim";
  return device_name.find("H200") != std::string::npos ? "h200" : other;
}

}  // namespace ferry::bench
