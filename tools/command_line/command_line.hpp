// One command-line style for every ferry tool and benchmark, on Boost.Program_options: `--flag value`
// and `--flag=value`, `--help` (and `-h`) listing the flags with their defaults, and every mistake (an
// unknown flag, a missing or malformed value, a flag given twice, a stray argument) named in an error.
// Abbreviated flags are not accepted, so that adding a flag never changes what an old command line means.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>

#include <chrono>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>

#include "tools/command_line/numbers.hpp"

namespace ferry::tools {

// A command line a tool cannot run with. The message names the flag and, where there is one, the value.
class usage_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class command_line {
 public:
  // `program` names the tool in messages; `summary` (one or more lines) heads its --help.
  command_line(std::string program, std::string summary);

  // Declares --name, whose value is written to `target` when given; `target`'s value beforehand is the
  // default that --help shows. A number must be written in digits and fit T (no sign, no wrap-around).
  command_line& text(const char* name, std::string& target, const char* help);
  // Declares --name without a value (a mode): `target` becomes true when it is given.
  command_line& switch_flag(const char* name, bool& target, const char* help);
  template <class T>
  command_line& number(const char* name, T& target, const char* help);
  // A number whose absence means something (the program picks a value itself): `target` holds one only
  // when the flag is given. `help` says what happens without it.
  template <class T>
  command_line& number(const char* name, std::optional<T>& target, const char* help);
  // --name as a count of `Unit` (e.g. std::chrono::milliseconds), stored in any duration type.
  template <class Unit, class Rep, class Period>
  command_line& duration(const char* name, std::chrono::duration<Rep, Period>& target, const char* help);

  enum class outcome { run, help };
  // Parses argv into the declared targets. outcome::help: --help or -h was among the arguments (then
  // nothing else is checked) and the usage was written to `out`. Throws usage_error for anything else
  // it cannot accept; the targets may then hold some of the values already read.
  outcome parse(int argc, const char* const* argv, std::ostream& out) const;

  // parse() for a program's main(): exits with status 0 after --help (usage on `out`) and with status 2
  // after a usage_error (its message and a pointer to --help on stderr).
  void parse_or_exit(int argc, const char* const* argv, std::ostream& out) const;

  // For a check parse() cannot make (how two flags combine, the form of a value): writes `message` as
  // parse_or_exit() writes a usage_error, and exits with status 2.
  [[noreturn]] void exit_with_usage_error(const std::string& message) const;

  // "usage: PROGRAM [flags]", the summary and one line per flag.
  std::string usage() const;

  const std::string& program() const noexcept { return program_; }

 private:
  command_line& declare(const char* name, const boost::program_options::value_semantic* value, const char* help,
                        const std::string& default_text);

  std::string program_;
  std::string summary_;
  boost::program_options::options_description flags_;
};

template <class T>
command_line& command_line::number(const char* name, T& target, const char* help) {
  auto* value = boost::program_options::value<detail::number_text<T>>()->value_name("N")->notifier(
      [&target](const detail::number_text<T>& given) { target = given.value; });
  return declare(name, value, help, detail::format_number(target));
}

template <class T>
command_line& command_line::number(const char* name, std::optional<T>& target, const char* help) {
  auto* value = boost::program_options::value<detail::number_text<T>>()->value_name("N")->notifier(
      [&target](const detail::number_text<T>& given) { target = given.value; });
  return declare(name, value, help, target ? detail::format_number(*target) : "");
}

template <class Unit, class Rep, class Period>
command_line& command_line::duration(const char* name, std::chrono::duration<Rep, Period>& target,
                                     const char* help) {
  using count_type = typename Unit::rep;
  auto* value = boost::program_options::value<detail::number_text<count_type>>()->value_name("N")->notifier(
      [&target](const detail::number_text<count_type>& given) {
        target = std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(Unit(given.value));
      });
  return declare(name, value, help, detail::format_number(std::chrono::duration_cast<Unit>(target).count()));
}

}  // namespace ferry::tools
