// The benchmarks' results files are valid JSON for any figure and any name: non-finite figures become
// null, strings are escaped, and the header names the ferry version that made them.
#include "bench/harness/report_json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "bench/harness/comparison.hpp"
#include "ferry/version.hpp"

namespace bench = ferry::bench;

namespace {

// The report as a reader gets it: serialized, then parsed back (which throws on invalid JSON).
boost::json::object round_trip(const std::vector<bench::result>& results, const std::string& backend = "cuda") {
  const std::string text = boost::json::serialize(bench::report_json(results, "machine", "device", backend));
  return boost::json::parse(text).as_object();
}

const boost::json::object& first_benchmark(const boost::json::object& report) {
  return report.at("benchmarks").as_array().at(0).as_object();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(report_json)

BOOST_AUTO_TEST_CASE(a_ratio_over_a_ferry_time_of_zero_is_written_as_null) {
  const bench::result r{"instant", 0, 0.0, 1e-6, 3, 1, ""};
  BOOST_REQUIRE(!std::isfinite(r.ratio()));
  const boost::json::object benchmark = first_benchmark(round_trip({r}));
  BOOST_TEST(benchmark.at("ratio").is_null());
  BOOST_TEST(benchmark.at("raw").as_double() == 1.0);
}

BOOST_AUTO_TEST_CASE(figures_that_are_not_numbers_are_written_as_null) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bench::result r{"nan", 4096, nan, std::numeric_limits<double>::infinity(), 1, 1, ""};
  const boost::json::object benchmark = first_benchmark(round_trip({r}));
  BOOST_TEST(benchmark.at("ferry").is_null());
  BOOST_TEST(benchmark.at("ratio").is_null());
  BOOST_TEST(benchmark.at("bytes").to_number<std::size_t>() == 4096u);
}

BOOST_AUTO_TEST_CASE(names_with_quotes_backslashes_and_control_characters_come_back_unchanged) {
  const std::string name = "a \"quoted\" \\ name\twith\ncontrol \x01 characters and \xc3\xa9";
  const bench::result r{name, 1, 1.0, 1.0, 1, 1, ""};
  BOOST_TEST(first_benchmark(round_trip({r})).at("name").as_string() == name);
}

BOOST_AUTO_TEST_CASE(the_header_names_the_ferry_version_and_the_sim) {
  const boost::json::object report = round_trip({}, "sim");
  BOOST_TEST(report.at("ferry_version").as_string() == std::string(ferry::version()));
  BOOST_TEST(report.at("backend").as_string() == "sim");
  BOOST_TEST(report.at("note").as_string() == bench::simulated_notice);
  BOOST_TEST(report.at("benchmarks").as_array().empty());
}

BOOST_AUTO_TEST_CASE(write_report_writes_a_file_that_parses) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "ferry-report-json-test";
  std::filesystem::remove_all(dir);
  bench::write_report({{"zero time", 0, 0.0, 2e-6, 5, 1, ""}}, dir.string(), "m-suite", "a \"device\"", "cuda");
  std::ifstream file(dir / "m-suite.json");
  std::ostringstream text;
  text << file.rdbuf();
  const boost::json::object report = boost::json::parse(text.str()).as_object();
  BOOST_TEST(report.at("device").as_string() == "a \"device\"");
  BOOST_TEST(first_benchmark(report).at("ratio").is_null());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
