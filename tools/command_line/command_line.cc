#include "tools/command_line/command_line.hpp"

#include <boost/program_options/errors.hpp>
#include <boost/program_options/parsers.hpp>
#include <boost/program_options/positional_options.hpp>
#include <boost/program_options/variables_map.hpp>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string_view>
#include <vector>

namespace po = boost::program_options;

namespace ferry::tools {
namespace {

// Arguments that are not flags land here, so that the error can name them (Program_options' own
// message for them names none).
constexpr const char* stray_arguments = "stray-arguments";

bool asks_for_help(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument == "--help" || argument == "-h") return true;
  }
  return false;
}

std::string message_of(const po::error& error) {
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&error)) {
    // The option as written, with "=VALUE" when it came that way: the flag is the part before.
    const std::string written = unknown->get_option_name();
    return "unknown flag '" + written.substr(0, written.find('=')) + "'";
  }
  return error.what();
}

}  // namespace

command_line::command_line(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)), flags_("flags", 100, 50) {
  flags_.add_options()("help,h", "print this help and exit");
}

command_line& command_line::text(const char* name, std::string& target, const char* help) {
  auto* value = po::value<std::string>()->value_name("TEXT")->notifier([&target](const std::string& given) { target = given; });
  return declare(name, value, help, target);
}

command_line& command_line::switch_flag(const char* name, bool& target, const char* help) {
  auto* value = po::bool_switch()->notifier([&target](bool given) {
    if (given) target = true;
  });
  return declare(name, value, help, "");
}

command_line& command_line::declare(const char* name, const po::value_semantic* value, const char* help,
                                    const std::string& default_text) {
  std::string description = help;
  if (!default_text.empty()) description += " (default: " + default_text + ")";
  flags_.add_options()(name, value, description.c_str());
  return *this;
}

command_line::outcome command_line::parse(int argc, const char* const* argv, std::ostream& out) const {
  if (asks_for_help(argc, argv)) {
    out << usage();
    return outcome::help;
  }
  po::options_description all;
  all.add(flags_).add_options()(stray_arguments, po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add(stray_arguments, -1);
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::variables_map values;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).style(style).run(), values);
    if (values.count(stray_arguments) != 0) {
      throw usage_error("unexpected argument '" + values[stray_arguments].as<std::vector<std::string>>().front() +
                        "' (every value follows its flag: --flag VALUE or --flag=VALUE)");
    }
    po::notify(values);
  } catch (const po::error& error) {
    throw usage_error(message_of(error));
  }
  return outcome::run;
}

void command_line::parse_or_exit(int argc, const char* const* argv, std::ostream& out) const {
  try {
    if (parse(argc, argv, out) == outcome::help) std::exit(0);
  } catch (const usage_error& error) {
    exit_with_usage_error(error.what());
  }
}

void command_line::exit_with_usage_error(const std::string& message) const {
  std::cerr << program_ << ": " << message << "\n(" << program_ << " --help lists the flags)\n";
  std::exit(2);
}

std::string command_line::usage() const {
  std::ostringstream text;
  text << "usage: " << program_ << " [flags]\n" << summary_ << "\n\n" << flags_;
  return text.str();
}

}  // namespace ferry::tools
