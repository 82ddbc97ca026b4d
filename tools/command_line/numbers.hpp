// How command_line reads a number: std::from_chars over the whole value, so that "12x", "", "-1" for
// an unsigned flag (which boost::lexical_cast would wrap around to a huge count) and values out of the
// type's range are refused with Program_options' own "the argument ('...') for option '--...' is
// invalid". Floating-point flags accept no negative value either: every flag counts something.
#pragma once

#include <boost/any.hpp>
#include <boost/program_options/errors.hpp>
#include <boost/program_options/value_semantic.hpp>

#include <charconv>
#include <sstream>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

namespace ferry::tools::detail {

template <class T>
struct number_text {
  T value{};
};

template <class T>
std::string format_number(T value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// Found by Program_options through argument-dependent lookup for number_text<T>.
template <class T>
void validate(boost::any& out, const std::vector<std::string>& values, number_text<T>*, int) {
  static_assert(std::is_arithmetic_v<T>);
  boost::program_options::validators::check_first_occurrence(out);
  const std::string& text = boost::program_options::validators::get_single_string(values);
  T value{};
  const char* const end = text.data() + text.size();
  const auto [stopped, status] = std::from_chars(text.data(), end, value);
  if (text.empty() || status != std::errc{} || stopped != end || value < T{}) {
    throw boost::program_options::invalid_option_value(text);
  }
  out = number_text<T>{value};
}

}  // namespace ferry::tools::detail
