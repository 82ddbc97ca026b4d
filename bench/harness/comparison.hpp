// The benchmark harness: each figure is ferry's operation and the raw driver call that does the same
// work, run in the same process, interleaved trial by trial after a warm-up, with the data verified after
// every trial. Medians are reported, with the ratio ferry / raw in "higher is better" terms.
#pragma once

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace ferry::bench {

// Heads everything a benchmark reports on the sim backend: its first console line, its table and plot.
inline constexpr const char* simulated_notice =
    "simulated driver: these figures describe the host simulation, not a GPU";

struct comparison_spec {
  std::string name;
  std::size_t bytes = 0;         // bytes moved per run (0: a call that moves none)
  std::size_t calls_per_run = 1;  // runs that loop over a cheap call report the time of one call
  int warmups = 2;
  int trials = 7;
  std::function<void()> ferry;   // one run of ferry's operation, complete when it returns
  std::function<void()> raw;     // one run of the raw driver calls doing the same work
  std::function<void()> verify;  // throws std::runtime_error when the last run's result is wrong
  std::function<void()> prepare;  // optional, untimed, before every run (e.g. move managed memory back)
  std::function<void()> verify_raw;  // optional: checks the raw side's result when it wrote elsewhere
};

struct result {
  std::string name;
  std::size_t bytes;
  double ferry_seconds;  // medians
  double raw_seconds;
  int trials;
  std::size_t calls_per_run = 1;
  // When set, ferry_seconds and raw_seconds hold plain figures in this unit (e.g. "% of a core").
  std::string fixed_unit;
  // GB/s (1e9 bytes/s) when bytes > 0, else microseconds per run.
  std::string unit() const { return !fixed_unit.empty() ? fixed_unit : bytes ? "GB/s" : "us"; }
  double ferry_figure() const;
  double raw_figure() const;
  // ferry's speed over raw's (raw time / ferry time): above 1 ferry is faster.
  double ratio() const { return raw_seconds == ferry_seconds ? 1.0 : raw_seconds / ferry_seconds; }
};

// Runs spec.warmups untimed rounds, then spec.trials rounds of (ferry, verify, raw, verify), alternating
// which goes first, and returns the medians. Prints a progress line to stderr, then each side's fastest,
// median and slowest trial, and a side's trials in order where they spread by more than a quarter.
result compare(const comparison_spec& spec);

// A benchmark's table run by one loop: compare() on each case, in the table's order.
std::vector<result> compare_all(const std::vector<comparison_spec>& table);

// A benchmark's groups of cases over one fixture, run in the order given (each group builds what its
// cases need, runs its table and releases it); their rows (results, or a diagnostic's own rows) in the
// same order.
template <class Fixture, class Row>
std::vector<Row> run_groups(Fixture& fixture, std::initializer_list<std::vector<Row> (*)(Fixture&)> groups) {
  std::vector<Row> rows;
  for (auto group : groups) {
    std::vector<Row> more = group(fixture);
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

// One run of a case that loops over a cheap call: body(0) ... body(times - 1). A template, so that the
// loop calls `body` directly: an indirect call per iteration would weigh on a call of a few nanoseconds.
template <class Body>
std::function<void()> repeated(std::size_t times, Body body) {
  return [times, body = std::move(body)] {
    for (std::size_t i = 0; i < times; ++i) body(i);
  };
}

// A size as rows name it: "4KiB", "16MiB", "4GiB" (the largest unit that divides it).
std::string size_name(std::size_t bytes);

// Writes the results as a table (stdout and <dir>/<machine>.md) and JSON (<dir>/<machine>.json, as
// report_json.hpp lays it out).
void write_report(const std::vector<result>& results, const std::string& dir, const std::string& machine,
                  const std::string& device_description, const std::string& backend);

}  // namespace ferry::bench
