#include "bench/harness/comparison.hpp"
#include "bench/harness/report_json.hpp"
#include "bench/harness/statistics.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace ferry::bench {
namespace {

// Before anything else a benchmark prints: a figure measured on the sim must never pass for a GPU's.
// FERRY_BACKEND is the only way a benchmark chooses the sim, and reading it needs no driver call.
[[maybe_unused]] const bool announced_sim = [] {
  const char* backend = std::getenv("FERRY_BACKEND");
  if (backend != nullptr && std::string_view(backend) == "sim") std::fprintf(stderr, "%s\n", simulated_notice);
  return true;
}();

double seconds_of(const std::function<void()>& prepare, const std::function<void()>& run) {
  if (prepare) prepare();
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double result::ferry_figure() const {
  if (!fixed_unit.empty()) return ferry_seconds;
  return bytes ? bytes / ferry_seconds / 1e9 : ferry_seconds * 1e6 / static_cast<double>(calls_per_run);
}
double result::raw_figure() const {
  if (!fixed_unit.empty()) return raw_seconds;
  return bytes ? bytes / raw_seconds / 1e9 : raw_seconds * 1e6 / static_cast<double>(calls_per_run);
}

result compare(const comparison_spec& spec) {
  const std::function<void()>& verify_raw = spec.verify_raw ? spec.verify_raw : spec.verify;
  for (int i = 0; i < spec.warmups; ++i) {
    seconds_of(spec.prepare, spec.ferry);
    spec.verify();
    seconds_of(spec.prepare, spec.raw);
    verify_raw();
  }
  std::vector<double> ferry_times, raw_times;
  for (int i = 0; i < spec.trials; ++i) {
    std::fprintf(stderr, "\r  %-36s trial %d/%d", spec.name.c_str(), i + 1, spec.trials);
    // Alternating the order keeps a warm cache or a busy copy engine from favouring one side.
    if (i % 2 == 0) {
      ferry_times.push_back(seconds_of(spec.prepare, spec.ferry));
      spec.verify();
      raw_times.push_back(seconds_of(spec.prepare, spec.raw));
      verify_raw();
    } else {
      raw_times.push_back(seconds_of(spec.prepare, spec.raw));
      verify_raw();
      ferry_times.push_back(seconds_of(spec.prepare, spec.ferry));
      spec.verify();
    }
  }
  std::fprintf(stderr, "\r%80s\r", "");
  // The medians hide how the trials spread: a row whose trials split in two (some paying a wake-up, say)
  // reads as one figure. The spread goes to the log beside them.
  const auto [ferry_fastest, ferry_slowest] = std::minmax_element(ferry_times.begin(), ferry_times.end());
  const auto [raw_fastest, raw_slowest] = std::minmax_element(raw_times.begin(), raw_times.end());
  std::fprintf(stderr, "  %s: a trial took %.1f / %.1f / %.1f us (fastest / median / slowest), raw %.1f / %.1f / "
               "%.1f\n", spec.name.c_str(), *ferry_fastest * 1e6, median(ferry_times) * 1e6, *ferry_slowest * 1e6,
               *raw_fastest * 1e6, median(raw_times) * 1e6, *raw_slowest * 1e6);
  // Where a side's trials spread by more than a quarter, each trial in the order run: whether the slow ones
  // follow the longer pauses (even trials run ferry first, odd ones raw first) or come in a stretch.
  const auto list_if_spread = [&spec](const char* side, const std::vector<double>& times, double fastest,
                                      double slowest) {
    if (slowest <= fastest * 1.25) return;
    std::fprintf(stderr, "  %s: %s trials in order (us):", spec.name.c_str(), side);
    for (double t : times) std::fprintf(stderr, " %.1f", t * 1e6);
    std::fprintf(stderr, "\n");
  };
  list_if_spread("ferry", ferry_times, *ferry_fastest, *ferry_slowest);
  list_if_spread("raw", raw_times, *raw_fastest, *raw_slowest);
  return {spec.name, spec.bytes, median(ferry_times), median(raw_times), spec.trials, spec.calls_per_run, ""};
}

std::vector<result> compare_all(const std::vector<comparison_spec>& table) {
  std::vector<result> results;
  for (const comparison_spec& spec : table) results.push_back(compare(spec));
  return results;
}

std::string size_name(std::size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

void write_report(const std::vector<result>& results, const std::string& dir, const std::string& machine,
                  const std::string& device_description, const std::string& backend) {
  std::ostringstream table;
  table << "| name | bytes | ferry | raw | unit | ratio (ferry/raw) | trials |\n|---|---:|---:|---:|---|---:|---:|\n";
  char line[512];
  for (const result& r : results) {
    std::snprintf(line, sizeof line, "| %s | %zu | %.3f | %.3f | %s | %.3f | %d |\n", r.name.c_str(), r.bytes,
                  r.ferry_figure(), r.raw_figure(), r.unit().c_str(), r.ratio(), r.trials);
    table << line;
  }
  const bool simulated = backend == "sim";
  const std::string notice = simulated ? std::string(simulated_notice) + "\n" : std::string();
  std::cout << "\n" << notice << device_description << " (backend " << backend << ")\n\n" << table.str() << std::flush;

  std::filesystem::create_directories(dir);
  std::ofstream markdown(std::filesystem::path(dir) / (machine + ".md"));
  markdown << "# ferry benchmarks: " << machine << (simulated ? " (simulated driver)" : "") << "\n\n" << notice
           << device_description << ", backend " << backend
           << ".\nRatio = ferry's speed over the raw driver's (same run, medians); above 1 ferry is faster.\n\n"
           << table.str();

  std::ofstream json(std::filesystem::path(dir) / (machine + ".json"));
  json << boost::json::serialize(report_json(results, machine, device_description, backend)) << "\n";
}

}  // namespace ferry::bench
