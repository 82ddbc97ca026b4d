// A benchmark's results as the JSON of its report file (Boost.JSON, so that every string is escaped as
// JSON requires). A figure that is not a finite number (a ratio over a time of zero, say) is written as
// null: JSON has no infinity or NaN.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <vector>

#include "bench/harness/comparison.hpp"

namespace ferry::bench {

// {"machine", "device", "backend", "ferry_version", ["note" on the sim,] "benchmarks": [{"name", "bytes",
// "ferry", "raw", "unit", "ratio", "trials"}, ...]}
boost::json::object report_json(const std::vector<result>& results, const std::string& machine,
                                const std::string& device_description, const std::string& backend);

}  // namespace ferry::bench
