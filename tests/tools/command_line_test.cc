// The command line every tool and benchmark shares (tools/command_line): both flag forms, --help, and a
// usage_error naming the flag and the value for every mistake.
#include "tools/command_line/command_line.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/expect_error.hpp"

using ferry::testing::expect_error;
using ferry::tools::command_line;
using ferry::tools::usage_error;

namespace {

struct settings {
  std::string name = "default";
  std::size_t count = 7;
  unsigned short port = 0;
  double seconds = 1.5;
  std::chrono::milliseconds deadline{250};
  bool mode = false;
};

command_line declare(settings& s) {
  command_line command("tool", "What the tool does.");
  command.text("name", s.name, "a name")
      .number("count", s.count, "a count")
      .number("port", s.port, "a port")
      .number("seconds", s.seconds, "a duration in seconds")
      .duration<std::chrono::milliseconds>("deadline-ms", s.deadline, "a deadline")
      .switch_flag("mode", s.mode, "a mode");
  return command;
}

command_line::outcome parse(settings& s, std::initializer_list<const char*> arguments, std::ostream& out) {
  std::vector<const char*> argv{"tool"};
  argv.insert(argv.end(), arguments);
  return declare(s).parse(static_cast<int>(argv.size()), argv.data(), out);
}

command_line::outcome parse(settings& s, std::initializer_list<const char*> arguments) {
  std::ostringstream out;
  return parse(s, arguments, out);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(command_line_suite)

BOOST_AUTO_TEST_CASE(flag_space_value_and_flag_equals_value_set_the_same_targets) {
  settings spaced, joined;
  BOOST_TEST((parse(spaced, {"--name", "x", "--count", "12", "--seconds", "0.25", "--deadline-ms", "40"}) ==
              command_line::outcome::run));
  BOOST_TEST((parse(joined, {"--name=x", "--count=12", "--seconds=0.25", "--deadline-ms=40"}) ==
              command_line::outcome::run));
  for (const settings* s : {&spaced, &joined}) {
    BOOST_TEST(s->name == "x");
    BOOST_TEST(s->count == 12u);
    BOOST_TEST(s->seconds == 0.25);
    BOOST_TEST(s->deadline.count() == 40);
  }
}

BOOST_AUTO_TEST_CASE(flags_not_given_keep_their_defaults) {
  settings s;
  parse(s, {"--count", "3"});
  BOOST_TEST(s.name == "default");
  BOOST_TEST(s.deadline.count() == 250);
  BOOST_TEST(!s.mode);
}

BOOST_AUTO_TEST_CASE(an_optional_number_holds_a_value_only_when_its_flag_is_given) {
  const auto parse_limit = [](std::initializer_list<const char*> arguments) {
    std::optional<std::size_t> limit;
    command_line command("tool", "What the tool does.");
    command.number("limit", limit, "a limit (without it: the tool's choice)");
    std::vector<const char*> argv{"tool"};
    argv.insert(argv.end(), arguments);
    std::ostringstream out;
    command.parse(static_cast<int>(argv.size()), argv.data(), out);
    return limit;
  };
  BOOST_TEST(!parse_limit({}).has_value());
  BOOST_TEST(parse_limit({"--limit", "1024"}).value_or(0) == 1024u);
  BOOST_TEST(parse_limit({"--limit=0"}).value_or(1) == 0u);
  expect_error<usage_error>([&] { parse_limit({"--limit", "-1"}); }, {"-1", "limit"});
}

BOOST_AUTO_TEST_CASE(a_switch_takes_no_value_and_refuses_one) {
  settings s;
  parse(s, {"--mode", "--count", "3"});
  BOOST_TEST(s.mode);
  BOOST_TEST(s.count == 3u);
  settings given_a_value;
  expect_error<usage_error>([&] { parse(given_a_value, {"--mode=yes"}); }, {"mode"});
}

BOOST_AUTO_TEST_CASE(help_writes_the_usage_with_every_flag_and_default_and_reads_nothing_else) {
  settings s;
  std::ostringstream out;
  BOOST_TEST((parse(s, {"--count", "not-a-number", "--help"}, out) == command_line::outcome::help));
  const std::string usage = out.str();
  for (const char* part : {"usage: tool", "What the tool does.", "--name", "(default: default)", "--count",
                           "(default: 7)", "--deadline-ms", "(default: 250)", "--help"}) {
    BOOST_TEST_CONTEXT(part) { BOOST_TEST(usage.find(part) != std::string::npos); }
  }
  BOOST_TEST(s.count == 7u);
}

BOOST_AUTO_TEST_CASE(short_h_is_help_too) {
  settings s;
  BOOST_TEST((parse(s, {"-h"}) == command_line::outcome::help));
}

BOOST_AUTO_TEST_CASE(an_unknown_flag_is_named) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--count", "1", "--bogus", "2"}); }, {"unknown flag '--bogus'"});
}

BOOST_AUTO_TEST_CASE(an_unknown_flag_given_with_equals_is_named_without_its_value) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--bogus=2"}); }, {"unknown flag '--bogus'"});
}

BOOST_AUTO_TEST_CASE(an_abbreviated_flag_is_unknown_rather_than_guessed) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--cou", "1"}); }, {"unknown flag '--cou'"});
}

BOOST_AUTO_TEST_CASE(a_flag_without_its_value_is_named) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--count"}); }, {"--count", "missing"});
}

BOOST_AUTO_TEST_CASE(a_malformed_number_is_named_with_its_value) {
  for (const char* bad : {"12x", "-1", "1e3", "+4", "18446744073709551616"}) {
    settings s;
    BOOST_TEST_CONTEXT(bad) {
      expect_error<usage_error>([&] { parse(s, {"--count", bad}); }, {"'--count'", std::string("'") + bad + "'"});
    }
  }
}

BOOST_AUTO_TEST_CASE(an_empty_number_is_refused) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--count", ""}); }, {"'--count'", "invalid"});
}

BOOST_AUTO_TEST_CASE(a_number_out_of_its_types_range_is_refused) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--port", "65536"}); }, {"'--port'", "'65536'"});
  BOOST_TEST((parse(s, {"--port", "65535"}) == command_line::outcome::run));
  BOOST_TEST(s.port == 65535);
}

BOOST_AUTO_TEST_CASE(a_negative_floating_point_value_is_refused) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--seconds=-0.5"}); }, {"'--seconds'", "'-0.5'"});
}

BOOST_AUTO_TEST_CASE(a_flag_given_twice_is_named) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--count", "1", "--count=2"}); }, {"--count", "more than once"});
}

BOOST_AUTO_TEST_CASE(an_argument_that_is_not_a_flag_is_named) {
  settings s;
  expect_error<usage_error>([&] { parse(s, {"--count", "1", "stray"}); }, {"unexpected argument 'stray'"});
}

BOOST_AUTO_TEST_SUITE_END()
