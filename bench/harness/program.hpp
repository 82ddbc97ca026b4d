// The device a benchmark measures, device 0, with its primary context current on the constructing
// thread for the object's life (the driver calls of a benchmark's thread need a current context), and
// what a comparison program holds beside it from start to report.
#pragma once

#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/options.hpp"
#include "ferry/ferry.hpp"

namespace ferry::bench {

struct primary_device {
  device gpu = device::get(0);
  context primary = context::primary(gpu);
  context_guard current{primary};
};

// What a comparison program holds from its start to its report: the command line (--out, --machine),
// the device it measures and the backend.
struct comparison_program {
  // `summary` heads the benchmark's --help.
  comparison_program(int argc, char** argv, const char* summary = default_summary)
      : options(parse_options(argc, argv, summary)) {}

  static constexpr const char* default_summary =
      "ferry against the raw driver, same process, interleaved trials; the report goes to\n"
      "<out>/<machine>-<suite>.{json,md}";

  // Writes the results as the report <machine>-<suite> under --out (machine_name names the machine,
  // `other_machine` where the device is neither the sim nor an H200).
  void report(const std::vector<result>& results, const std::string& suite, const std::string& description,
              const std::string& other_machine = "gpu") const {
    write_report(results, options.out_dir, machine_name(options, backend, on.gpu.name(), other_machine) + "-" + suite,
                 description, backend);
  }

  const bench::options options;  // parsed first: a wrong argument ends the run before the driver is touched
  const primary_device on;
  const std::string backend{to_string(active_backend())};
};

}  // namespace ferry::bench
