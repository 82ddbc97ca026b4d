#include "bench/harness/report_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <cmath>

#include "ferry/version.hpp"

namespace ferry::bench {
namespace {

boost::json::value figure(double value) {
  if (!std::isfinite(value)) return nullptr;
  return value;
}

boost::json::object benchmark_json(const result& r) {
  return {{"name", r.name},
          {"bytes", r.bytes},
          {"ferry", figure(r.ferry_figure())},
          {"raw", figure(r.raw_figure())},
          {"unit", r.unit()},
          {"ratio", figure(r.ratio())},
          {"trials", r.trials}};
}

}  // namespace

boost::json::object report_json(const std::vector<result>& results, const std::string& machine,
                                const std::string& device_description, const std::string& backend) {
  boost::json::object report{{"machine", machine},
                             {"device", device_description},
                             {"backend", backend},
                             {"ferry_version", std::string(ferry::version())}};
  if (backend == "sim") report["note"] = simulated_notice;
  boost::json::array benchmarks;
  for (const result& r : results) benchmarks.push_back(benchmark_json(r));
  report["benchmarks"] = std::move(benchmarks);
  return report;
}

}  // namespace ferry::bench
