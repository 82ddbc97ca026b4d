// Reading the command lines of pipeline_server and pipeline_load: a flag's value as a number.
#pragma once

#include <stdexcept>
#include <string>

namespace ferry::pipeline {

// The non-negative integer `text`, given to `flag`; std::invalid_argument naming both when it is not one.
inline unsigned long long flag_number(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-') {
    throw std::invalid_argument(flag + ": \"" + text + "\" is not a non-negative integer");
  }
  return value;
}

}  // namespace ferry::pipeline
